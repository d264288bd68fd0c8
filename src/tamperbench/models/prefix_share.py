"""Prefix-shared prefill for chat generation: prefill a shared prompt prefix once, fork it.

Why: the prompts of one run share long prefixes. Exact Words asks 3 to 4 items per document and
two arms per item, all after the same document; its ``depth`` preset puts the same ~3,000-token
fused document before every one of its 74 questions; a judge's stricter retry re-reads its whole
first conversation (the jury's prompts share only the system prompt and one line with each other:
the paper's template puts the reply before the rubric). Prefill is compute-bound on a CPU, so reading a shared prefix once
instead of once per prompt is most of a run's prefill time.

How (greedy outputs are those of each prompt prefilled alone, up to float rounding, which the
tests and ``benchmarks/quote_throughput.py`` check token for token):

1. :func:`~tamperbench.models.prefix_groups.plan_groups` (models/prefix_groups.py) sorts the prompts by their token ids, so prompts sharing a prefix are
   neighbours, and cuts the sorted list into runs by dynamic programming over the number of
   prefill tokens: a run shares the longest prefix common to all its members (never a member's
   last token, whose logits start the answer), a prompt alone costs its length.
2. :class:`PrefixAdmitter` prefills a group's prefix once (batch 1), then the members' suffixes
   as rows of one forward over that cached prefix (each suffix right after the prefix, padding
   after it, positions continuing after the prefix), and admits each row into the step decoder
   as a snapshot of its suffix's KV over the shared prefix: the decoder keeps the prefix once for
   the whole group and reads it once a step (cascade attention, decoding/cascade.py), or, on the
   copy path, copies it into every row and decodes each as if it had prefilled it itself.
   Suffixes of very different lengths go in separate forwards (:func:`split_by_length`). Under
   cascade attention the prefill is a prefix tree (models/prefix_tree.py): the groups' common
   start (a system prompt) is prefilled once a call, and what members share beyond their group's
   prefix (an instruction both arms repeat) once per branch.
   A group bigger than the free slots waits with its prefix cache (batch 1) for the next slots.
3. :class:`PrefixStore` (``HFBackend.prefix_memory``) keeps finished rows' prompt + answer KV for
   the next calls of one block: a later prompt that starts with a stored row skips that prefill.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from tamperbench.models.prefix_groups import MIN_SHARED, Group, common_prefix, plan_groups, split_by_length

__all__ = ["PrefixAdmitter", "PrefixStore"]

class PrefixStore:
    """Prompt + answer KV kept from one generation call for the next ones (``HFBackend.prefix_memory``).

    Why: a judge's stricter retry is its first conversation (system prompt, rubric, reply, its own
    first answer) plus one reminder: re-reading ~600 tokens to add ~100. A later prompt that starts
    with a stored row's tokens is admitted from that row's KV (cut to the common prefix; keys of a
    prefix never depend on what follows it). Entries are sorted by token ids, so the entry sharing
    the longest prefix with a prompt is a neighbour of the prompt's insertion point (bisect).
    Only valid while the weights and hooks stay as they were: callers scope a store to one block.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self.bytes = 0
        self.ids: list[list[int]] = []
        self.kv: list[list[tuple[torch.Tensor, torch.Tensor]]] = []

    def remember(self, ids: Sequence[int], kv: list[tuple[torch.Tensor, torch.Tensor]]) -> bool:
        """Keep ``kv`` (per layer (keys, values), batch 1, one column per id) unless it overflows."""
        import bisect

        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if self.bytes + size > self.max_bytes or kv[0][0].shape[-2] != len(ids):
            return False
        at = bisect.bisect_left(self.ids, list(ids))
        self.ids.insert(at, list(ids))
        self.kv.insert(at, kv)
        self.bytes += size
        return True

    def best(self, ids: Sequence[int]) -> tuple[int, int]:
        """(longest common prefix with any entry, that entry's index); (0, -1) when empty."""
        import bisect

        at = bisect.bisect_left(self.ids, list(ids))
        hits = [(common_prefix(self.ids[j], ids), j) for j in (at - 1, at) if 0 <= j < len(self.ids)]
        return max(hits, default=(0, -1))


def _stored_groups(store: PrefixStore, prompts: Sequence[Sequence[int]], min_shared: int
                   ) -> tuple[list[tuple[Group, list]], list[int]]:
    """Prompts that start with a stored row, grouped by that row (prefix: the least common prefix of
    the group, at most each member's length - 1); and the indices of the other prompts."""
    by_entry: dict[int, list[tuple[int, int]]] = {}
    rest = []
    for i, q in enumerate(prompts):
        c, j = store.best(q)
        c = min(c, len(q) - 1)
        if c >= min_shared:
            by_entry.setdefault(j, []).append((i, c))
        else:
            rest.append(i)
    out = []
    for j, hits in by_entry.items():
        p = min(c for _, c in hits)
        out.append((Group(p, [i for i, _ in hits]), [(k[:, :, :p], v[:, :, :p]) for k, v in store.kv[j]]))
    return out, rest


@dataclass
class _Pending:
    group: Group
    waiting: deque
    shared: Any = None  # the prefix (per layer keys, values; batch 1) as one decoding.cascade.SharedPrefix


@dataclass
class PrefixAdmitter:
    """Admits prompts into a ``StepDecoder``, prefilling each shared prefix once.

    ``admit(n)`` returns up to ``n`` (row id, prompt index) pairs. Counters say where prefill
    time went: ``prefill_tokens`` fed, ``prefill_tokens_alone`` (what prefilling each prompt
    alone would feed) and ``prefill_seconds``.
    """

    # a StepDecoder (typed loosely: it is built around transformers' cache classes); may be set after
    # construction: run_generation sizes the batch from the planned groups first
    dec: Any
    prompts: Sequence[Sequence[int]]
    share: bool = True
    store: PrefixStore | None = None  # KV kept from earlier calls (and filled from this one)
    groups: list[Group] = field(default_factory=list)
    prefill_tokens: int = 0
    prefill_tokens_alone: int = 0
    prefill_seconds: float = 0.0

    def __post_init__(self) -> None:
        # Sliding-window models share too, prefixes longer than the window included: in the suffix
        # forward each row's real columns are prefix then suffix with no gap (padding comes after),
        # so a window measured in columns is the window in positions, and afterwards the decoder
        # measures it by position (tests/integration/models/test_prefix_share_sliding.py checks
        # both against a no-cache reference, and that an off-by-one window would change tokens).
        self._root_len, self._root_ids = 0, []  # see prefix_tree.root_length
        self._root_kv: list | None = None
        if not self.share:
            self.groups = [Group(0, list(range(len(self.prompts))))]
            self._queue = deque(_Pending(g, deque(g.members)) for g in self.groups)
            return
        stored: list[tuple[Group, list]] = []
        rest = list(range(len(self.prompts)))
        if self.store is not None and self.store.ids:
            stored, rest = _stored_groups(self.store, self.prompts, MIN_SHARED)
        planned = [Group(g.prefix, [rest[k] for k in g.members]) for g in plan_groups([self.prompts[i] for i in rest])]
        self.groups = [g for g, _ in stored] + planned
        from tamperbench.models.prefix_tree import root_length

        # the tokens every planned group's prefix starts with: prefilled once under the tree
        self._root_len = root_length(planned, self.prompts)
        self._root_ids = list(self.prompts[planned[0].members[0]][: self._root_len]) if self._root_len else []
        from tamperbench.models.decoding.cascade import SharedPrefix

        self._queue = deque([_Pending(g, deque(g.members), SharedPrefix(kv)) for g, kv in stored]
                            + [_Pending(g, deque(g.members)) for g in planned])

    @torch.inference_mode()
    def remember(self, rids: Sequence[int]) -> None:
        """Keep finished rows' prompt + answer KV in the store (before the decoder releases them)."""
        if self.store is None or not self.share:
            return
        for rid in rids:
            self.store.remember(self.dec.tokens(rid), [(k[None], v[None]) for k, v in
                                                       self.dec.kv.export(self.dec.by_id[rid])])

    def split_lengths(self) -> tuple[int, int]:
        """(the longest prompt part after its group's shared prefix, the shared prefixes' tokens summed):
        what rows and groups hold under cascade attention (memory.py sizes the batch by them)."""
        private = max((len(self.prompts[i]) - g.prefix for g in self.groups for i in g.members), default=1)
        return private, sum(g.prefix for g in self.groups)

    def padded_tokens(self) -> int:
        """Columns of the stacked prefix copy cascade attention reads when this call has two or more
        groups (decoding/cascade.py, PaddedPrefixes): groups x the longest; 0 with one (read in place)."""
        lens = [g.prefix for g in self.groups if g.prefix > 0]
        return len(lens) * max(lens) if len(lens) > 1 else 0

    @property
    def pending(self) -> int:
        return sum(len(p.waiting) for p in self._queue)

    def admit(self, n: int) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        t0 = time.perf_counter()
        tree, taken = self._tree, 0
        batch: list[tuple[_Pending, list[int]]] = []
        while n > taken and self._queue:
            pend = self._queue[0]
            take = [pend.waiting.popleft() for _ in range(min(n - taken, len(pend.waiting)))]
            taken += len(take)
            if pend.group.prefix == 0:
                out.extend(self._flush(batch))  # rows take slots in the groups' order
                out.extend(zip(self.dec.add_rows([self.prompts[i] for i in take]), take))
                self.prefill_tokens += sum(len(self.prompts[i]) for i in take)
            elif tree:  # every group admitted now, in common forwards (prefix_tree.admit_tree)
                batch.append((pend, take))
            else:
                out.extend(self._admit_shared(pend, take))
            self.prefill_tokens_alone += sum(len(self.prompts[i]) for i in take)
            if not pend.waiting:
                self._queue.popleft()
        out.extend(self._flush(batch))
        self.prefill_seconds += time.perf_counter() - t0
        return out

    def _flush(self, batch: list) -> list[tuple[int, int]]:
        """Admit the shared groups collected so far in common forwards (prefix_tree.admit_tree)."""
        from tamperbench.models.prefix_tree import admit_tree

        out = admit_tree(self, batch) if batch else []
        batch.clear()
        return out

    # ------------------------------------------------------------------ the shared path
    @property
    def _tree(self) -> bool:
        """Prefill as a prefix tree (models/prefix_tree.py): only under cascade attention, whose rows
        may hold a padding gap (never sliding-window models); the copy path stays one level."""
        return self.share and getattr(self.dec, "shared_prefix_attention", None) is not None

    @torch.inference_mode()
    def _admit_shared(self, pend: _Pending, take: list[int]) -> list[tuple[int, int]]:
        """One level (the copy path): the group's prefix once, then every member's whole suffix."""
        from tamperbench.models.prefix_tree import admit_rows

        p = pend.group.prefix
        if pend.shared is None:
            from tamperbench.models.decoding.cascade import SharedPrefix

            pend.shared = SharedPrefix(self._prefill_prefix(list(self.prompts[take[0]][:p]), False))
        out: list = []
        # longest forward first: the decoder's buffers then grow once, not once per forward
        for part in reversed(split_by_length([len(self.prompts[i]) - p for i in take], prefix=p)):
            chunk = [take[k] for k in part]
            rids = admit_rows(self.dec, [pend.shared] * len(chunk), [list(self.prompts[i]) for i in chunk],
                              [None] * len(chunk))
            out.extend(zip(rids, chunk))
            self.prefill_tokens += sum(len(self.prompts[i]) - p for i in chunk)
        return out

    def _prefill_prefix(self, ids: list[int], tree: bool) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A group prefix's KV (batch 1); under the tree, from the call's root prefilled once."""
        from tamperbench.models.prefix_tree import prefill_prefix

        n = self._root_len if tree else 0
        if n and ids[:n] == self._root_ids:
            if self._root_kv is None:
                self._root_kv = prefill_prefix(self.dec, self._root_ids)
                self.prefill_tokens += n
            self.prefill_tokens += len(ids) - n
            return prefill_prefix(self.dec, ids, (n, self._root_kv))
        self.prefill_tokens += len(ids)
        return prefill_prefix(self.dec, ids)
