"""Prefix-shared prefill for chat generation: prefill a shared prompt prefix once, fork it.

Why: the prompts of one run share long prefixes. Exact Words asks 3 to 4 items per document and
two arms per item, all after the same document; its ``depth`` preset puts the same ~3,000-token
fused document before every one of its 74 questions; a jury asks the same system prompt and
rubric before every reply. Prefill is compute-bound on a CPU, so reading a shared prefix once
instead of once per prompt is most of a run's prefill time.

How (greedy outputs are those of each prompt prefilled alone, up to float rounding, which the
tests and ``benchmarks/quote_throughput.py`` check token for token):

1. :func:`plan_groups` sorts the prompts by their token ids, so prompts sharing a prefix are
   neighbours, and cuts the sorted list into runs by dynamic programming over the number of
   prefill tokens: a run shares the longest prefix common to all its members (never a member's
   last token, whose logits start the answer), a prompt alone costs its length.
2. :class:`PrefixAdmitter` prefills a group's prefix once (batch 1), then the members' suffixes
   as rows of one forward over that cached prefix (each suffix right after the prefix, padding
   after it, positions continuing after the prefix), and admits each row into the step decoder
   as a snapshot: the decoder then decodes every row exactly as if it had prefilled it itself.
   Suffixes of very different lengths go in separate forwards (:func:`split_by_length`).
   A group bigger than the free slots waits with its prefix cache (batch 1) for the next slots.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Group", "PrefixAdmitter", "common_prefix", "plan_groups", "prefill_cost", "split_by_length"]

MIN_SHARED = 16  # a shared prefix shorter than this is not worth an extra forward
GROUP_OVERHEAD = 8  # one more forward pass, in prefill-token equivalents (the DP's tie breaker)
_PREFILL_COLUMNS = 16384  # rows x columns per suffix forward: bounds its activation and KV memory
SUFFIX_OVERHEAD = 16  # one more suffix forward (weights read again), in padded-token equivalents


@dataclass
class Group:
    """Prompts (by index) that share their first ``prefix`` tokens; ``prefix == 0``: prefill alone."""

    prefix: int
    members: list[int]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prefill_cost(groups: Sequence[Group], prompts: Sequence[Sequence[int]]) -> int:
    """Tokens fed in prefill under ``groups`` (without sharing: the sum of the prompt lengths)."""
    return sum(g.prefix + sum(len(prompts[i]) - g.prefix for i in g.members) for g in groups)


def plan_groups(prompts: Sequence[Sequence[int]], *, min_shared: int = MIN_SHARED) -> list[Group]:
    """Partition the prompts into groups that minimise prefill tokens (see the module docstring).

    Contiguous runs of the lexicographically sorted prompts suffice: the prompts sharing any
    prefix form one contiguous run of that order. O(n^2) in the number of prompts (one call of
    ``generate_chat``), cheap next to one forward pass.
    """
    order = sorted(range(len(prompts)), key=lambda i: list(prompts[i]))
    n = len(order)
    lcp = [common_prefix(prompts[order[j]], prompts[order[j + 1]]) for j in range(n - 1)]
    best = [0] * (n + 1)  # best[j]: cost of order[:j]
    cut = [0] * (n + 1)
    share = [0] * (n + 1)
    for j in range(1, n + 1):
        i = j - 1
        best[j], cut[j], share[j] = best[i] + len(prompts[order[i]]), i, 0
        shared, shortest, total = None, len(prompts[order[i]]), len(prompts[order[i]])
        for a in range(j - 2, -1, -1):  # group order[a:j]
            shared = lcp[a] if shared is None else min(shared, lcp[a])
            shortest = min(shortest, len(prompts[order[a]]))
            total += len(prompts[order[a]])
            p = min(shared, shortest - 1)  # every member keeps at least one suffix token
            if p < min_shared:
                break
            cost = best[a] + GROUP_OVERHEAD + p + (total - p * (j - a))
            if cost < best[j]:
                best[j], cut[j], share[j] = cost, a, p
    groups: list[Group] = []
    j = n
    while j > 0:
        a = cut[j]
        groups.append(Group(share[j], [order[k] for k in range(a, j)]))
        j = a
    groups.reverse()
    return groups


def split_by_length(lens: Sequence[int], *, prefix: int, overhead: int = SUFFIX_OVERHEAD,
                    max_columns: int = _PREFILL_COLUMNS) -> list[list[int]]:
    """Cut suffixes (by index into ``lens``) into forwards that minimise padded suffix tokens.

    Why: the suffixes of one forward are padded to its longest, and a padded token costs a real
    one (an Exact Words document's ``strict`` instructions are twice as long as its ``plain``
    ones, so one forward wasted about a third of its suffix tokens). Sorted by length, contiguous
    runs; a run costs rows x its longest + ``overhead`` (one more forward, in token equivalents),
    and holds at most ``max_columns`` columns (rows x (prefix + longest)) unless it is one row.
    """
    order = sorted(range(len(lens)), key=lambda i: lens[i])
    n = len(order)
    best = [0] + [float("inf")] * n  # best[j]: cost of order[:j]
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        longest = lens[order[j - 1]]
        for i in range(j - 1, -1, -1):
            rows = j - i
            if rows > 1 and rows * (prefix + longest) > max_columns:
                break
            cost = best[i] + overhead + rows * longest
            if cost < best[j]:
                best[j], cut[j] = cost, i
    parts: list[list[int]] = []
    j = n
    while j > 0:
        parts.append(order[cut[j]:j])
        j = cut[j]
    return parts[::-1]


@dataclass
class _Pending:
    group: Group
    waiting: deque
    kv: list | None = None  # per layer (keys, values) of the prefix, batch 1
    logits: torch.Tensor | None = None


@dataclass
class PrefixAdmitter:
    """Admits prompts into a ``StepDecoder``, prefilling each shared prefix once.

    ``admit(n)`` returns up to ``n`` (row id, prompt index) pairs. Counters say where prefill
    time went: ``prefill_tokens`` fed, ``prefill_tokens_alone`` (what prefilling each prompt
    alone would feed) and ``prefill_seconds``.
    """

    dec: Any  # a StepDecoder (typed loosely: it is built around transformers' cache classes)
    prompts: Sequence[Sequence[int]]
    share: bool = True
    groups: list[Group] = field(default_factory=list)
    prefill_tokens: int = 0
    prefill_tokens_alone: int = 0
    prefill_seconds: float = 0.0

    def __post_init__(self) -> None:
        # Sliding-window models share too, prefixes longer than the window included: in the suffix
        # forward each row's real columns are prefix then suffix with no gap (padding comes after),
        # so a window measured in columns is the window in positions, and afterwards the decoder
        # measures it by position (tests/integration/speed/test_prefix_share_sliding.py checks
        # both against a no-cache reference, and that an off-by-one window would change tokens).
        self.groups = (plan_groups(self.prompts) if self.share
                       else [Group(0, list(range(len(self.prompts))))])
        self._queue = deque(_Pending(g, deque(g.members)) for g in self.groups)

    @property
    def pending(self) -> int:
        return sum(len(p.waiting) for p in self._queue)

    def admit(self, n: int) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        t0 = time.perf_counter()
        while n > len(out) and self._queue:
            pend = self._queue[0]
            take = [pend.waiting.popleft() for _ in range(min(n - len(out), len(pend.waiting)))]
            if pend.group.prefix == 0:
                out.extend(zip(self.dec.add_rows([self.prompts[i] for i in take]), take))
                self.prefill_tokens += sum(len(self.prompts[i]) for i in take)
            else:
                out.extend(self._admit_shared(pend, take))
            self.prefill_tokens_alone += sum(len(self.prompts[i]) for i in take)
            if not pend.waiting:
                self._queue.popleft()
        self.prefill_seconds += time.perf_counter() - t0
        return out

    # ------------------------------------------------------------------ the shared path
    @torch.inference_mode()
    def _admit_shared(self, pend: _Pending, take: list[int]) -> list[tuple[int, int]]:
        p = pend.group.prefix
        if pend.kv is None:
            pend.kv = self._prefill_prefix(list(self.prompts[take[0]][:p]))
            self.prefill_tokens += p
        out: list = []
        # longest forward first: the decoder's buffers then grow once, not once per forward
        for part in reversed(split_by_length([len(self.prompts[i]) - p for i in take], prefix=p)):
            chunk = [take[k] for k in part]
            out.extend(zip(self._extend(pend.kv, p, [list(self.prompts[i]) for i in chunk]), chunk))
            self.prefill_tokens += sum(len(self.prompts[i]) - p for i in chunk)
        return out

    def _prefill_prefix(self, ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        from transformers import DynamicCache

        cache = DynamicCache()
        t = torch.tensor([ids], device=self.dec.device)
        self.dec._forward(t, torch.ones_like(t, dtype=torch.bool), torch.arange(len(ids), device=t.device)[None],
                          cache, logits_to_keep=1)
        return [(layer.keys, layer.values) for layer in cache.layers]

    def _extend(self, kv: list, p: int, prompts: list[list[int]]) -> list[int]:
        """One forward of every prompt's suffix over the shared prefix cache; admits the rows.

        Suffixes are right-padded, so each row's real columns are one contiguous run (the prefix,
        then its suffix: a view, no gather); the padding comes after them and, causal, changes
        nothing before it. The logits are kept at each row's last real token only."""
        from transformers import DynamicCache

        from tamperbench.models.decoding.distributions import distribution
        from tamperbench.models.decoding.rows import RowSnapshot

        dec, m = self.dec, len(prompts)
        lens = [len(q) - p for q in prompts]
        L = max(lens)
        dev = dec.device
        ids = torch.full((m, L), dec.pad_id, dtype=torch.long, device=dev)
        am = torch.zeros(m, p + L, dtype=torch.bool, device=dev)
        am[:, :p] = True
        for r, (q, k) in enumerate(zip(prompts, lens)):
            ids[r, :k] = torch.tensor(q[p:], device=dev)
            am[r, p:p + k] = True
        pos = torch.arange(p, p + L, device=dev).expand(m, L)
        cache = DynamicCache()
        for li, (k, v) in enumerate(kv):
            cache.update(k.expand(m, -1, -1, -1), v.expand(m, -1, -1, -1), li)
        last = torch.tensor([[k - 1] for k in lens], device=dev)  # (m, 1): each row's own last token
        logp, stats = distribution(dec._forward(ids, am, pos, cache, logits_to_keep=last)[:, -1], dec.topk)
        rids = [0] * m
        for r in sorted(range(m), key=lambda r: -lens[r]):  # longest first: later rows fit, no regrowth
            q, k = prompts[r], lens[r]
            row_kv = [(layer.keys[r, :, :p + k], layer.values[r, :, :p + k]) for layer in cache.layers]
            st = stats.map(lambda t: t[r])  # noqa: B023
            snap = RowSnapshot(row_kv, list(q), len(q), False, None, logp[r], logp[r], st, st, len(q))
            [rids[r]] = dec.import_rows(snap, 1)
        return rids
