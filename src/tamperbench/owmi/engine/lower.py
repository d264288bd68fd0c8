"""The layers below the hooked site, kept across batches: what a row's tokens give there, computed once per engine.

Why: ``bottom.py`` runs the layers below the first hooked layer once per group of rows of one batch that
hold the same tokens. But the same tokens recur far beyond one batch: every cell and seed of an item feeds
the same Track A probe contexts, the same option tries, the same task prompt and baseline answer (the
teacher-forced effects and every bisection step of impact matching), and no hook reads or writes anything
below its layer. So what those layers give for a row -- the hidden state entering the hooked layer and
the keys/values of the layers below it, for the columns of the block just fed -- depends on the row's
tokens alone (all it has been fed, then the block) and is kept here, keyed by them: a later batch feeding
the same tokens on a row whose lower layers were never hooked takes them from here and runs only the
layers from the hooked one up.

The keys are exact: (the split layer, every token the row holds, the block; a packed option trie keys its
nodes with their parents), so a hit is the very computation, to float rounding of another batch shape
(the engine-equivalence tests bound it). A row whose cache below the split was ever written by a hook
(``ragged.Rows.low``) neither reads nor writes here. Bounded: the least recently used entries go once
the kept tensors pass ``budget`` bytes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

import torch

STORE_BYTES = 256 * 2**20  # kept hidden states and keys/values, per engine

# (hidden entering the split layer: (n, hidden); keys/values of each layer below it: (kv heads, n, head dim))
Entry = tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]


class LowerStore:
    """What the layers below the hooked one give for a row's block, by (model, split, tokens): LRU, bounded."""

    def __init__(self, budget: int = STORE_BYTES):
        self.budget = budget
        self.bytes = 0
        self.hits = self.misses = 0
        self._got: OrderedDict[Hashable, tuple[Entry, int]] = OrderedDict()

    def get(self, key: Hashable) -> Entry | None:
        got = self._got.get(key)
        if got is None:
            self.misses += 1
            return None
        self._got.move_to_end(key)
        self.hits += 1
        return got[0]

    def put(self, key: Hashable, entry: Entry) -> None:
        if key in self._got:
            return
        h, kv = entry
        size = h.numel() * h.element_size() + sum(k.numel() * k.element_size() + v.numel() * v.element_size()
                                                  for k, v in kv)
        if size > self.budget:
            return
        self._got[key] = (entry, size)
        self.bytes += size
        while self.bytes > self.budget:
            _, (_, old) = self._got.popitem(last=False)
            self.bytes -= old

    def __len__(self) -> int:
        return len(self._got)
