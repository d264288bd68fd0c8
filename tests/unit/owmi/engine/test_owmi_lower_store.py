"""The lower-layer store (``owmi/engine/lower.py``): exact keys, least recently used entries dropped past
its byte budget, an entry larger than the budget never kept."""

from __future__ import annotations

import torch

from tamperbench.owmi.engine.lower import LowerStore


def _entry(n: int):  # n columns: hidden (n, 4) and two layers' keys/values (2, n, 2), float32
    return torch.zeros(n, 4), [(torch.zeros(2, n, 2), torch.zeros(2, n, 2)) for _ in range(2)]


def test_exact_keys_and_counts():
    s = LowerStore()
    s.put(("m", 12, (1, 2), (3,)), _entry(1))
    assert s.get(("m", 12, (1, 2), (3,))) is not None
    assert s.get(("m", 12, (1, 2), (3, 4))) is None and s.get(("m", 13, (1, 2), (3,))) is None
    assert (s.hits, s.misses, len(s)) == (1, 2, 1)


def test_least_recently_used_go_past_the_budget():
    one = 4 * (4 + 2 * 2 * 2 * 2)  # bytes of a one-column entry: 16 + 64
    s = LowerStore(budget=2 * one)
    s.put("a", _entry(1))
    s.put("b", _entry(1))
    assert s.get("a") is not None  # a is now the most recently used
    s.put("c", _entry(1))
    assert s.get("b") is None and s.get("a") is not None and s.get("c") is not None
    assert s.bytes == 2 * one
    s.put("big", _entry(3))  # larger than the whole budget: not kept, nothing dropped
    assert s.get("big") is None and len(s) == 2
