"""Properties of the clustered mean bootstrap that a mutant of the seed, the level or the
resampling could break: seeded (same seed same interval, another seed another), narrower with more
clusters, nested levels, and percentile ends that match numpy's quantiles on the replicates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tamperbench.stats.bootstrap import mean_bootstrap, percentile_interval


def data(n_clusters, per=3, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=n_clusters * per)
    clusters = np.repeat(np.arange(n_clusters), per)
    return values, clusters


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(20, 40))
def test_seeded_same_seed_same_interval_other_seed_other_interval(seed, n):
    """From 20 clusters up: with 5 clusters only 126 resample means exist, and two seeds can put
    both percentiles on the same ones (hypothesis found seed=1008, n=5), which is not a bug."""
    v, c = data(n, seed=n)
    a = mean_bootstrap(v, c, n_boot=300, seed=seed)
    assert a == mean_bootstrap(v, c, n_boot=300, seed=seed)
    b = mean_bootstrap(v, c, n_boot=300, seed=seed + 1)
    assert a["ci"] != b["ci"] and a["estimate"] == b["estimate"] == pytest.approx(v.mean())


def test_interval_narrows_with_more_clusters_about_as_one_over_sqrt_n():
    w = {}
    for n in (20, 320):
        v, c = data(n, seed=1)
        lo, hi = mean_bootstrap(v, c, n_boot=1000, seed=0)["ci"]
        w[n] = hi - lo
    # 16x the clusters: about 1/4 the width (sampling noise allowed: between 1/6 and 1/2.5)
    assert w[320] / w[20] == pytest.approx(0.25, abs=0.09)


def test_levels_nest_and_the_se_is_the_replicate_sd():
    v, c = data(60, seed=2)
    wide = mean_bootstrap(v, c, n_boot=800, seed=3, level=0.99)["ci"]
    mid = mean_bootstrap(v, c, n_boot=800, seed=3, level=0.95)
    narrow = mean_bootstrap(v, c, n_boot=800, seed=3, level=0.5)["ci"]
    assert wide[0] < mid["ci"][0] < narrow[0] < narrow[1] < mid["ci"][1] < wide[1]
    # clusters of 3 iid N(0,1): the cluster mean has sd 1/sqrt(3); se of the grand mean ~ 1/sqrt(180)
    assert mid["se"] == pytest.approx(1 / np.sqrt(180), rel=0.25) and mid["n"] == 180


def test_percentile_interval_is_numpy_quantiles_of_the_finite_replicates():
    reps = np.array([5.0, np.nan, 1.0, np.inf, 3.0, 2.0, 4.0, -np.inf])
    finite = np.array([5.0, 1.0, 3.0, 2.0, 4.0])
    assert percentile_interval(reps, 0.5) == tuple(np.quantile(finite, [0.25, 0.75]))
    assert percentile_interval(reps, 0.5) == (2.0, 4.0)  # by hand: quartiles of 1..5
    assert all(np.isnan(x) for x in percentile_interval(np.array([np.nan])))
    empty = mean_bootstrap([], [])
    assert empty["n"] == 0 and np.isnan(empty["estimate"])
