"""The item-level permutation test of AUROC = 0.5 (stats/permutation.py), checked by brute force.

Why: the detection verdict's p-value comes from it. Its statistic must be the AUROC itself (the
midrank identity), and its p-value the share of the 2^items within-item relabellings whose AUROC is at
least as far from 0.5 as the observed one; both are recomputed here by enumerating every relabelling
with ``sdt.auroc``, independently of scipy's permutation machinery.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tamperbench.stats.permutation import item_signflip_test
from tamperbench.stats.sdt import auroc


def _brute(gi, gs, clusters):
    items = sorted(set(clusters))
    obs = abs(auroc(gi, gs) - 0.5)
    hits = 0
    for flips in itertools.product((0, 1), repeat=len(items)):
        f = dict(zip(items, flips))
        a = [s if f[c] else i for i, s, c in zip(gi, gs, clusters)]
        b = [i if f[c] else s for i, s, c in zip(gi, gs, clusters)]
        hits += abs(auroc(a, b) - 0.5) >= obs - 1e-12
    return hits / 2 ** len(items)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_p_and_statistic_equal_brute_force_enumeration(seed):
    rng = np.random.default_rng(seed)
    n = 14
    gi = np.round(rng.random(n) + 0.15, 1)  # rounded: ties inside and across pairs
    gs = np.round(rng.random(n), 1)
    clusters = [f"item{k}" for k in rng.integers(0, 7, n)]
    r = item_signflip_test(gi, gs, clusters)
    assert r["auroc"] == pytest.approx(auroc(gi, gs), abs=1e-12)
    assert r["exact"] is True and r["flips"] == 2 ** len(set(clusters))
    assert r["p_value"] == pytest.approx(_brute(list(gi), list(gs), clusters), abs=1e-12)


def test_perfect_and_inverted_detectors_and_a_constant_reporter():
    cl = [k // 2 for k in range(40)]  # 20 items, two pairs each
    perfect = item_signflip_test(np.ones(40), np.zeros(40), cl)
    inverted = item_signflip_test(np.zeros(40), np.ones(40), cl)
    assert perfect["p_value"] < 0.001 and inverted["p_value"] < 0.001 and perfect["exact"] is False
    assert perfect["auroc"] == 1.0 and inverted["auroc"] == 0.0
    three = item_signflip_test(np.ones(3), np.zeros(3), [0, 1, 2])
    assert three["p_value"] == pytest.approx(2 / 8)  # the exact floor with 3 items: no over-confidence
    const = item_signflip_test(np.full(20, 0.5), np.full(20, 0.5), range(20))
    assert const["p_value"] == 1.0 and const["auroc"] == 0.5
    assert item_signflip_test([], [], [])["p_value"] is None
    one = item_signflip_test([1.0, 1.0], [0.0, 0.0], ["a", "a"])  # one item: its two flips are equally extreme
    assert one["p_value"] == 1.0 and one["exact"] is True and one["flips"] == 2
