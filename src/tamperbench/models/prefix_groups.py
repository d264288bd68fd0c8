"""Which prompts share which prefix: the token arithmetic of prefix-shared prefill, no tensors.

The planning half of models/prefix_share.py (see its docstring), in a module of its own below both
prefix_share.py (which prefills and admits the groups) and prefix_tree.py (which prefills them as a
tree under cascade attention), so that neither imports the other for it. ``--dry-run`` counts a
call's prefill tokens with the same functions (quote/plan.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["GROUP_OVERHEAD", "MIN_SHARED", "SUFFIX_OVERHEAD", "Group", "common_prefix", "plan_groups", "prefill_cost",
           "split_by_length"]

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
