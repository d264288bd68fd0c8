"""The clustered bootstrap against a by-hand reference written here: the same generator stream
(one row of ``n_clusters`` uniform cluster indices per replicate, numpy's documented
``default_rng(seed).integers``), the resampled pairs rebuilt in plain Python, d' from the standard library's probit
 with the 1/(2N) correction, AUROC from its pairwise definition, the margin as a difference of means;
then numpy's quantiles and the ddof=1 standard deviation. Pins the seed, the level, the default
replicate count, the chunking and every statistic's replicates at once."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy.stats import norm

from tamperbench.stats.bootstrap import cluster_codes, cluster_weight_chunks, detection_bootstrap, mean_bootstrap


PROBIT = NormalDist().inv_cdf  # the standard library's probit: fast per call, independent of scipy


def rate(k, n):
    return 0.5 / n if k == 0 else (1 - 0.5 / n if k == n else k / n)


def pairwise_auroc(gi, gs):
    return sum((a > b) + 0.5 * (a == b) for a in gi for b in gs) / (len(gi) * len(gs))


def hand_bootstrap(yi, ys, gi, gs, clusters, n_boot, seed, level):
    labels = sorted({str(c) for c in clusters})
    members = [[j for j, c in enumerate(clusters) if str(c) == lab] for lab in labels]
    rng = np.random.default_rng(seed)
    reps = {"dprime": [], "auroc": [], "margin": []}
    for _ in range(n_boot):
        rows = [j for c in rng.integers(0, len(labels), size=len(labels)) for j in members[c]]
        n = len(rows)
        h, f = sum(yi[j] for j in rows), sum(ys[j] for j in rows)
        reps["dprime"].append(PROBIT(rate(h, n)) - PROBIT(rate(f, n)))
        reps["auroc"].append(pairwise_auroc([gi[j] for j in rows], [gs[j] for j in rows]))
        reps["margin"].append((h - f) / n)
    a = (1 - level) / 2
    return {k: (tuple(np.quantile(v, [a, 1 - a])), float(np.std(v, ddof=1))) for k, v in reps.items()}


DATA = dict(
    yi=[1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1],
    ys=[0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0],
    gi=[0.9, 0.7, 0.2, 0.8, 0.4, 0.7, 0.9, 0.1, 0.6, 0.8, 0.3, 0.7],
    gs=[0.2, 0.7, 0.1, 0.3, 0.4, 0.6, 0.2, 0.1, 0.7, 0.4, 0.2, 0.3],
    clusters=["q3", "q3", "q1", "q1", "q1", "q2", "q4", "q4", "q5", "q5", "q5", "q6"],
)


@pytest.mark.parametrize("n_boot,seed,level,chunk", [(97, 5, 0.9, 10), (2, 1, 0.95, 256), (40, 123, 0.5, 7)])
def test_detection_bootstrap_equals_the_hand_reference(n_boot, seed, level, chunk):
    d = DATA
    got = detection_bootstrap(d["yi"], d["ys"], d["clusters"], g_int=d["gi"], g_sham=d["gs"], n_boot=n_boot,
                              seed=seed, level=level, chunk=chunk)
    want = hand_bootstrap(d["yi"], d["ys"], d["gi"], d["gs"], d["clusters"], n_boot, seed, level)
    assert got["n_pairs"] == 12 and got["n_clusters"] == 6
    for k in ("dprime", "auroc", "margin"):
        assert got[k]["ci"] == pytest.approx(want[k][0], abs=1e-12), k
        assert got[k]["se"] == pytest.approx(want[k][1], abs=1e-12), k
    n = 12
    assert got["dprime"]["estimate"] == pytest.approx(norm.ppf(8 / n) - norm.ppf(3 / n))
    assert got["margin"]["estimate"] == pytest.approx((8 - 3) / n)
    assert got["auroc"]["estimate"] == pytest.approx(pairwise_auroc(d["gi"], d["gs"]))


def test_detection_bootstrap_defaults_are_2000_replicates_seed_0_and_95_percent():
    yi, ys, cl = [1, 1, 0, 1, 0], [0, 1, 0, 0, 0], ["a", "a", "b", "c", "c"]
    got = detection_bootstrap(yi, ys, cl)  # binary scores for the AUROC
    want = hand_bootstrap(yi, ys, yi, ys, cl, 2000, 0, 0.95)
    for k in ("dprime", "auroc", "margin"):
        assert got[k]["ci"] == pytest.approx(want[k][0], abs=1e-12), k
        assert got[k]["se"] == pytest.approx(want[k][1], abs=1e-12), k


def test_detection_bootstrap_refuses_unequal_lengths_and_one_replicate_has_no_se():
    with pytest.raises(ValueError, match="^detection_bootstrap: paired inputs must have equal lengths$"):
        detection_bootstrap([1, 0], [0], ["a", "b"])
    with pytest.raises(ValueError, match="equal lengths"):
        detection_bootstrap([1, 0], [0, 1], ["a"])
    with pytest.raises(ValueError, match="equal lengths"):
        detection_bootstrap([1, 0], [0, 1], ["a", "b"], g_int=[0.1])
    with pytest.raises(ValueError, match="equal lengths"):
        detection_bootstrap([1, 0], [0, 1], ["a", "b"], g_sham=[0.1, 0.2, 0.3])
    one = detection_bootstrap([1, 0, 1], [0, 0, 1], ["a", "b", "c"], n_boot=1)
    assert math.isnan(one["margin"]["se"]) and one["margin"]["ci"][0] == one["margin"]["ci"][1]
    none = detection_bootstrap([1, 0], [0, 0], ["a", "b"], n_boot=0)
    assert math.isnan(none["margin"]["se"]) and all(math.isnan(x) for x in none["margin"]["ci"])
    empty = detection_bootstrap([], [], [])
    assert empty["n_clusters"] == 0 and all(math.isnan(empty[k]["se"]) for k in ("dprime", "auroc", "margin"))
    assert all(math.isnan(x) for k in ("dprime", "auroc", "margin") for x in empty[k]["ci"])


def test_mean_bootstrap_equals_the_hand_reference_at_defaults_and_otherwise():
    v = [0.3, -0.2, 0.5, 1.1, 0.0, 0.4, -0.7, 0.9]
    c = ["b", "a", "b", "c", "c", "c", "d", "e"]

    def hand(n_boot, seed, level):
        labels = sorted(set(c))
        members = [[j for j, x in enumerate(c) if x == lab] for lab in labels]
        rng = np.random.default_rng(seed)
        reps = []
        for _ in range(n_boot):
            rows = [j for k in rng.integers(0, len(labels), size=len(labels)) for j in members[k]]
            reps.append(sum(v[j] for j in rows) / len(rows))
        a = (1 - level) / 2
        return tuple(np.quantile(reps, [a, 1 - a])), float(np.std(reps, ddof=1))

    got = mean_bootstrap(v, c)
    ci, se = hand(2000, 0, 0.95)
    assert got["ci"] == pytest.approx(ci, abs=1e-12) and got["se"] == pytest.approx(se, abs=1e-12)
    assert got["n"] == 8 and got["estimate"] == pytest.approx(sum(v) / 8)
    got = mean_bootstrap(v, c, n_boot=33, seed=9, level=0.8, chunk=5)
    ci, se = hand(33, 9, 0.8)
    assert got["ci"] == pytest.approx(ci, abs=1e-12) and got["se"] == pytest.approx(se, abs=1e-12)
    one = mean_bootstrap(v, c, n_boot=1)
    assert math.isnan(one["se"])


def test_cluster_codes_and_chunk_shapes():
    codes, n = cluster_codes(["b", "a", "b", 3, "3"])  # labels compared as text: 3 and "3" are one item
    assert codes.tolist() == [2, 1, 2, 0, 0] and n == 3 and codes.dtype == np.int64
    codes, n = cluster_codes([])
    assert codes.size == 0 and n == 0
    shapes = [w.shape for w in cluster_weight_chunks(np.array([0, 0, 1, 2]), 3, 50, seed=1, chunk=20)]
    assert shapes == [(20, 4), (20, 4), (10, 4)]
    shapes = [w.shape for w in cluster_weight_chunks(np.array([0, 0, 1, 2]), 3, 5, seed=1, chunk=20, expand=False)]
    assert shapes == [(5, 3)]
    assert [w.shape for w in cluster_weight_chunks(np.array([0, 1]), 2, 300, seed=0)] == [(256, 2), (44, 2)]


def test_mean_bootstrap_single_value_two_replicates_and_empty():
    one = mean_bootstrap([2.5], ["a"], n_boot=20)
    assert one["n"] == 1 and one["estimate"] == 2.5 and one["ci"] == (2.5, 2.5) and one["se"] == 0.0
    two = mean_bootstrap([0.0, 1.0, 3.0], ["a", "b", "c"], n_boot=2, seed=4)
    rng = np.random.default_rng(4)
    reps = [np.mean(np.array([0.0, 1.0, 3.0])[rng.integers(0, 3, size=3)]) for _ in range(2)]
    assert two["se"] == pytest.approx(np.std(reps, ddof=1)) and math.isfinite(two["se"])
    empty = mean_bootstrap([], [])
    assert all(math.isnan(x) for x in empty["ci"]) and math.isnan(empty["se"])


def test_plain_loop_reference_returns_its_replicates_at_its_level():
    from tamperbench.stats.bootstrap import detection_bootstrap_loop

    d = DATA
    loop = detection_bootstrap_loop(d["yi"], d["ys"], d["clusters"], g_int=d["gi"], g_sham=d["gs"], n_boot=30,
                                    seed=2, level=0.6)
    want = hand_bootstrap(d["yi"], d["ys"], d["gi"], d["gs"], d["clusters"], 30, 2, 0.6)
    assert loop["dprime"]["ci"] == pytest.approx(want["dprime"][0], abs=1e-12)
    assert loop["auroc"]["ci"] == pytest.approx(want["auroc"][0], abs=1e-12)
    assert float(np.std(loop["dprime_reps"], ddof=1)) == pytest.approx(want["dprime"][1], abs=1e-12)
    assert float(np.std(loop["auroc_reps"], ddof=1)) == pytest.approx(want["auroc"][1], abs=1e-12)
    assert loop["dprime_reps"].shape == loop["auroc_reps"].shape == (30,)



def test_percentile_interval_default_is_95_percent():
    from tamperbench.stats.bootstrap import percentile_interval

    assert percentile_interval(np.arange(101.0)) == pytest.approx((2.5, 97.5))  # numpy's linear quantiles of 0..100
