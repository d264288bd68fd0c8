"""Crossed variance components at the level of their parts: pair counts and pairwise sums against a
brute-force loop over all pairs, the moment equations on a tiny two-factor design solved by hand
(numpy's exact solve of the same E[(s_u - s_v)^2] equations written out pair by pair), the ICC
truncation, and the item-resampling intervals against a by-hand loop on the same generator stream."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tamperbench.stats.variance import _pairs_same, _u_stat, icc_contrasts, iccs, variance_components


def brute_pairs_same(*codes):
    n = len(codes[0])
    return sum(all(c[u] == c[v] for c in codes) for u, v in itertools.combinations(range(n), 2))


def brute_u(y, codes=None):
    return sum((y[u] - y[v]) ** 2 for u, v in itertools.combinations(range(len(y)), 2)
               if codes is None or codes[u] == codes[v])


def test_pair_counts_and_pairwise_sums_by_brute_force():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 17)
    b = rng.integers(0, 4, 17)
    y = rng.normal(size=17)
    assert _pairs_same(a) == brute_pairs_same(a)
    assert _pairs_same(a, b) == brute_pairs_same(a, b)
    assert _pairs_same(b, a) == brute_pairs_same(a, b)
    assert _u_stat(y, None) == pytest.approx(brute_u(y))
    assert _u_stat(y, a) == pytest.approx(brute_u(y, a))
    # codes need not be dense in the pair key: (0, 5) and (1, 0) must not collide
    assert _pairs_same(np.array([0, 1, 0]), np.array([5, 0, 5])) == 1


def moment_solution(y, factors):
    """The K + 1 moment equations, each side summed pair by pair, solved exactly."""
    names = list(factors)
    pairs = list(itertools.combinations(range(len(y)), 2))
    rows, rhs = [], []
    for s in [None, *names]:
        sel = [(u, v) for u, v in pairs if s is None or factors[s][u] == factors[s][v]]
        row = [sum(2.0 * (factors[g][u] != factors[g][v]) for u, v in sel) for g in names] + [2.0 * len(sel)]
        rows.append(row)
        rhs.append(sum((y[u] - y[v]) ** 2 for u, v in sel))
    return dict(zip([*names, "residual"], np.linalg.solve(np.array(rows), np.array(rhs))))


def test_variance_components_solve_the_pairwise_moment_equations():
    rng = np.random.default_rng(3)
    a = np.repeat(np.arange(4), 6)  # 4 levels
    b = np.tile(np.arange(3), 8)  # 3 levels, crossed
    y = rng.normal(size=a.size) + np.array([0.0, 1.0, -1.0, 2.0])[a]
    got = variance_components(y, {"a": a, "b": b})
    assert got["n"] == 24
    want = moment_solution(y, {"a": a, "b": b})
    for k in ("a", "b", "residual"):
        assert got["sigma2"][k] == pytest.approx(want[k], rel=1e-9, abs=1e-12), k
    assert list(got["sigma2"]) == ["a", "b", "residual"]
    # labels are read as text: the same design with string labels gives the same components
    s = variance_components(y, {"a": [f"L{x}" for x in a], "b": [str(x) for x in b]})["sigma2"]
    assert s == pytest.approx(got["sigma2"])


def test_variance_components_need_two_observations():
    one = variance_components([1.0], {"a": ["x"]})
    assert one["n"] == 1 and set(one["sigma2"]) == {"a", "residual"}
    assert all(math.isnan(v) for v in one["sigma2"].values())


def test_iccs_truncate_negatives_and_exclude_the_residual():
    assert iccs({"a": 1.0, "b": 3.0, "residual": 4.0}) == {"a": 0.125, "b": 0.375}
    assert iccs({"a": -2.0, "residual": 2.0}) == {"a": 0.0}
    out = iccs({"a": -1.0, "residual": 0.0})  # nothing positive: undefined, not a division by zero
    assert list(out) == ["a"] and math.isnan(out["a"])


def design(n_items=8, seeds=3, seed=1):
    rng = np.random.default_rng(seed)
    item = np.repeat(np.arange(n_items), seeds)
    dom = item % 2
    sd = np.tile(np.arange(seeds), n_items)
    y = rng.normal(size=item.size) + 1.5 * dom + 0.8 * rng.normal(size=n_items)[item]
    return y, {"domain": dom, "item": item, "seed": sd}


def hand_intervals(y, fac, n_boot, seed, level):
    fac = {k: np.asarray([str(v) for v in vals]) for k, vals in fac.items()}
    levels = sorted(set(fac["item"]))
    members = [np.flatnonzero(fac["item"] == lab) for lab in levels]
    rng = np.random.default_rng(seed)
    reps = {"domain": [], "item": [], "seed": [], "delta_domain": [], "delta_item": []}
    for _ in range(n_boot):
        drawn = rng.integers(0, len(levels), len(levels))
        rows = np.concatenate([members[j] for j in drawn])
        copy = np.concatenate([[str(c)] * members[j].size for c, j in enumerate(drawn)])
        f2 = {"domain": fac["domain"][rows], "item": copy, "seed": fac["seed"][rows]}
        s2 = variance_components(y[rows], f2)["sigma2"]
        pos = {k: max(0.0, v) for k, v in s2.items()}
        tot = sum(pos.values())
        ic = {k: pos[k] / tot for k in ("domain", "item", "seed")}
        for k in ("domain", "item", "seed"):
            reps[k].append(ic[k])
        for k in ("domain", "item"):
            reps[f"delta_{k}"].append(ic[k] - ic["seed"])
    a = (1 - level) / 2
    return {k: tuple(np.quantile(v, [a, 1 - a])) for k, v in reps.items()}


@pytest.mark.parametrize("n_boot,seed,level", [(25, 4, 0.9), (12, 0, 0.5)])
def test_icc_intervals_resample_items_as_new_items(n_boot, seed, level):
    y, fac = design()
    got = icc_contrasts(y, fac, n_boot=n_boot, seed=seed, level=level)
    want = hand_intervals(y, fac, n_boot, seed, level)
    for k in ("domain", "item", "seed"):
        assert got["icc"][k]["ci"] == pytest.approx(want[k], abs=1e-12), k
    for k in ("domain", "item"):
        assert got["delta"][k]["ci"] == pytest.approx(want[f"delta_{k}"], abs=1e-12), k
        assert got["delta"][k]["established"] is bool(want[f"delta_{k}"][0] > 0)
    assert set(got["delta"]) == {"domain", "item"} and got["n"] == y.size
    point = iccs(variance_components(y, fac)["sigma2"])
    assert got["icc"]["domain"]["estimate"] == pytest.approx(point["domain"])
    assert got["delta"]["item"]["estimate"] == pytest.approx(point["item"] - point["seed"])
    assert got["sigma2"] == pytest.approx(variance_components(y, fac)["sigma2"])


def test_icc_defaults_are_200_replicates_seed_0_and_95_percent():
    y, fac = design(n_items=5, seeds=2, seed=2)
    got = icc_contrasts(y, fac)
    want = hand_intervals(y, fac, 200, 0, 0.95)
    assert got["icc"]["domain"]["ci"] == pytest.approx(want["domain"], abs=1e-12)
    assert got["delta"]["domain"]["ci"] == pytest.approx(want["delta_domain"], abs=1e-12)


def test_icc_contrasts_without_items_seed_factor_or_replicates():
    y, fac = design(n_items=4)
    no_boot = icc_contrasts(y, fac, n_boot=0)
    assert all(math.isnan(x) for x in no_boot["icc"]["domain"]["ci"])
    assert no_boot["delta"]["domain"]["established"] is False
    no_item = icc_contrasts(y, {"domain": fac["domain"], "seed": fac["seed"]}, n_boot=5)
    assert all(math.isnan(x) for x in no_item["icc"]["domain"]["ci"])
    no_seed = icc_contrasts(y, {"domain": fac["domain"], "item": fac["item"]}, n_boot=5)
    assert no_seed["delta"] == {} and set(no_seed["icc"]) == {"domain", "item"}
    other = icc_contrasts(y, {"domain": fac["domain"], "unit": fac["item"], "run": fac["seed"]},
                          item="unit", seed_factor="run", n_boot=5, seed=1)
    assert set(other["delta"]) == {"domain", "unit"} and math.isfinite(other["icc"]["domain"]["ci"][0])


def test_two_observations_and_one_replicate_are_enough():
    # two replicates in one level: the residual is their sample variance ((0 - 1)^2 + (2 - 1)^2) / 1 = 2
    v = variance_components([0.0, 2.0], {"a": ["x", "x"]})["sigma2"]
    assert v["residual"] == pytest.approx(2.0) and v["a"] == pytest.approx(0.0, abs=1e-12)
    two = icc_contrasts([0.0, 2.0], {"domain": ["d", "e"], "item": ["a", "b"], "seed": ["s", "s"]}, n_boot=20)
    assert all(math.isfinite(x) for x in two["icc"]["domain"]["ci"])
    y, fac = design(n_items=4)
    one = icc_contrasts(y, fac, n_boot=1, seed=3)
    lo, hi = one["icc"]["domain"]["ci"]
    assert math.isfinite(lo) and lo == hi
