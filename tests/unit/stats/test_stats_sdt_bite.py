"""d', the edge correction and the tied AUROC pinned where a mutant would slip through the
existing tests: N = 1 and N = 0 rates, arrays in and out, the weighted form against scikit-learn's
``roc_auc_score(sample_weight=...)`` (an independent implementation of the same statistic), and
the histogram form against the same library."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from tamperbench.stats.sdt import auroc, corrected_rate, dprime, dprime_counts, level_auroc, weighted_auroc


def test_corrected_rate_at_one_trial_and_zero_trials():
    # N = 1: 0/1 -> 1/2 and 1/1 -> 1 - 1/2, so a single pair carries no d'
    assert corrected_rate(0, 1) == 0.5 and corrected_rate(1, 1) == 0.5
    assert corrected_rate(1, 2) == 0.5 and corrected_rate(2, 4) == 0.5
    # N = 0: no rate at all, whatever k
    out = corrected_rate([0, 3, 1], [0, 0, 4])
    assert math.isnan(out[0]) and math.isnan(out[1]) and out[2] == 0.25


def test_corrected_rate_elementwise_each_with_its_own_n():
    got = corrected_rate([0, 5, 20, 7], [5, 5, 40, 10])
    assert got.tolist() == [0.1, 0.9, 0.5, 0.7]


def test_dprime_counts_scalar_is_float_and_arrays_are_elementwise():
    d = dprime_counts(30, 50, 10, 40)
    assert type(d) is float
    got = dprime_counts(np.array([30, 8, 40]), np.array([50, 8, 40]), np.array([10, 0, 0]), np.array([40, 8, 10]))
    want = [norm.ppf(0.6) - norm.ppf(0.25), norm.ppf(1 - 1 / 16) - norm.ppf(1 / 16), norm.ppf(1 - 1 / 80) - norm.ppf(1 / 20)]
    assert isinstance(got, np.ndarray) and got == pytest.approx(want)


def test_dprime_of_a_single_pair_and_of_unequal_lengths():
    assert dprime([1], [0]) == 0.0
    assert dprime([1, 1, 0], [0, 0, 0, 0, 1]) == pytest.approx(norm.ppf(2 / 3) - norm.ppf(1 / 5))
    assert math.isnan(dprime([1], [])) and math.isnan(dprime([], []))


def pairwise_auroc(gi, gs, wi, ws):
    """The definition, one intervention x sham combination at a time: P(int > sham) + P(tie) / 2."""
    gt = (gi[:, None] > gs[None, :]) + 0.5 * (gi[:, None] == gs[None, :])
    return float((wi[:, None] * ws[None, :] * gt).sum() / (wi.sum() * ws.sum()))


@settings(max_examples=15, deadline=None)
@given(gi=st.lists(st.integers(0, 3), min_size=1, max_size=12), gs=st.lists(st.integers(0, 3), min_size=1, max_size=12),
       seed=st.integers(0, 1000))
def test_weighted_auroc_equals_the_pairwise_definition(gi, gs, seed):
    rng = np.random.default_rng(seed)
    gi, gs = np.array(gi, float) / 3, np.array(gs, float) / 3
    wi = rng.integers(0, 4, size=(3, gi.size)).astype(float)
    ws = rng.integers(0, 4, size=(3, gs.size)).astype(float)
    got = weighted_auroc(gi, gs, wi, ws)
    assert got.shape == (3,)
    for r in range(3):
        if wi[r].sum() == 0 or ws[r].sum() == 0:
            assert math.isnan(got[r])
        else:
            assert got[r] == pytest.approx(pairwise_auroc(gi, gs, wi[r], ws[r]), abs=1e-12)


def test_weighted_auroc_equals_sklearn_with_sample_weight():
    rng = np.random.default_rng(0)
    gi, gs = rng.integers(0, 5, 30) / 4, rng.integers(0, 5, 25) / 4
    wi, ws = rng.integers(0, 4, 30).astype(float), rng.integers(0, 4, 25).astype(float)
    want = roc_auc_score(np.r_[np.ones(30), np.zeros(25)], np.r_[gi, gs], sample_weight=np.r_[wi, ws])
    assert weighted_auroc(gi, gs, wi, ws)[0] == pytest.approx(want, abs=1e-12)


def test_weighted_auroc_by_hand_with_ties_and_one_dimensional_weights():
    # int scores 1, 2; sham scores 1, 1, 3. Pairs: (1 vs 1) ties x2 -> 1/2 each; (1 vs 3) loss;
    # (2 vs 1) wins x2; (2 vs 3) loss. Unweighted: (0.5 + 0.5 + 0 + 1 + 1 + 0) / 6 = 0.5
    g_i, g_s = [1.0, 2.0], [3.0, 1.0, 1.0]
    assert weighted_auroc(g_i, g_s, [1, 1], [1, 1, 1]).tolist() == [0.5]
    # weight the 2 three times: (1 * (0 + 1) + 3 * 2) / (4 * 3) = 7/12
    assert weighted_auroc(g_i, g_s, [1, 3], [1, 1, 1])[0] == pytest.approx(7 / 12)
    # weight the sham 3 twice: (1 * (1/2 + 1/2) + 1 * 2) / (2 * 4) = 3/8
    assert weighted_auroc(g_i, g_s, [1, 1], [2, 1, 1])[0] == pytest.approx(3 / 8)


def test_weighted_auroc_zero_total_weight_is_nan_not_an_error():
    got = weighted_auroc([1.0], [0.0], [[0.0], [1.0]], [[1.0], [1.0]])
    assert math.isnan(got[0]) and got[1] == 1.0


@settings(max_examples=15, deadline=None)
@given(hi=st.lists(st.integers(0, 5), min_size=4, max_size=4), hs=st.lists(st.integers(0, 5), min_size=4, max_size=4))
def test_level_auroc_equals_the_definition_on_the_expanded_scores(hi, hs):
    levels = np.array([0.1, 0.4, 0.5, 0.9])
    got = level_auroc(np.array([hi], float), np.array([hs], float))[0]
    if sum(hi) == 0 or sum(hs) == 0:
        assert math.isnan(got)
    else:
        assert got == pytest.approx(pairwise_auroc(levels, levels, np.array(hi, float), np.array(hs, float)), abs=1e-12)


def test_level_auroc_equals_sklearn_on_expanded_scores():
    levels, hi, hs = np.array([0.1, 0.4, 0.5, 0.9]), [3, 0, 2, 5], [4, 1, 2, 1]
    gi, gs = np.repeat(levels, hi), np.repeat(levels, hs)
    want = roc_auc_score(np.r_[np.ones(gi.size), np.zeros(gs.size)], np.r_[gi, gs])
    assert level_auroc(np.array([hi], float), np.array([hs], float))[0] == pytest.approx(want, abs=1e-12)


def test_auroc_is_a_float_and_below_chance_is_below_one_half():
    a = auroc([0, 0, 1], [1, 1, 1, 0])
    # pairs: int 0 vs sham 1 (x3) loss, vs sham 0 tie -> 1/2, twice; int 1 vs sham 1 tie x3, vs 0 win
    assert type(a) is float and a == pytest.approx((0.5 + 0.5 + 1.5 + 1) / 12)


def test_corrected_rate_broadcasts_a_scalar_against_an_array():
    assert corrected_rate(np.array([0, 1, 4]), 4).tolist() == [0.125, 0.25, 0.875]
    assert corrected_rate(2, np.array([2, 4, 8])).tolist() == [0.75, 0.5, 0.25]
