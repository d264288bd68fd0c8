"""The number-producing parts of the linear-probe anchor (owmi/controls/probe.py): the item split,
one layer's held-out accuracy with its label-shuffled null, and the line that describes it.

Why: ``m_probe`` and its pass/fail gate the D.5 claim level (a null without a passing probe is only
an instrument diagnosis). The model-driven path is tested with the embedded model elsewhere; here
the statistics run on small synthetic features, so every field is checked in the fast suite.
Expected values come from scikit-learn (standardise + logistic regression) and numpy (the
permutations and quantiles) drawn here by hand, never from the module. Pure: no model, no files.
"""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from tamperbench.owmi.controls.probe import ProbeSpec, split_items, describe_layer, fit_layer


def _by_hand(x_sham, x_int, train, test, n_perm, seed):
    xtr, xte = np.r_[x_sham[train], x_int[train]], np.r_[x_sham[test], x_int[test]]
    ytr = np.r_[np.zeros(train.size), np.ones(train.size)]
    yte = np.r_[np.zeros(test.size), np.ones(test.size)]

    def acc(labels):
        clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(xtr, labels)
        return float(np.mean(clf.predict(xte) == yte))

    rng = np.random.default_rng(seed)
    null = np.array([acc(rng.permutation(ytr)) for _ in range(n_perm)]) - 0.5
    return acc(ytr), null


def _noise(seed, n=16, d=3, shift=0.0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=(n, d)) + shift


def test_split_by_item_matches_a_hand_permutation():
    perm = np.random.default_rng(5).permutation(20)
    train, test = split_items(20, 0.3, 5)
    assert list(test) == sorted(perm[:6]) and list(train) == sorted(perm[6:])
    assert len(split_items(8, 0.01, 0)[1]) == 1  # round(0.08) = 0 items: at least one is held out
    assert len(split_items(9, 0.5, 0)[1]) == 4  # round(4.5) = 4 (half to even)


def test_layer_statistics_against_scikit_learn_and_numpy():
    xs, xi = _noise(1, shift=0.6)
    train, test = np.arange(10), np.arange(10, 16)
    got = fit_layer(xs, xi, train, test, n_perm=9, quantile=0.8, seed=4)
    acc, null = _by_hand(xs, xi, train, test, 9, 4)
    assert got["accuracy"] == acc and got["margin"] == pytest.approx(acc - 0.5)
    assert (got["n_train"], got["n_test"], got["n_perm"]) == (20, 12, 9)
    assert got["errors"] == round((1 - acc) * 12)
    assert got["null_mean"] == pytest.approx(null.mean())
    assert got["null_sd"] == pytest.approx(np.std(null, ddof=1))
    assert got["null_band"] == pytest.approx((np.quantile(null, 0.025), np.quantile(null, 0.975)))
    assert got["null_quantile"] == pytest.approx(np.quantile(null, 0.8))
    assert got["passes"] is bool(acc - 0.5 > np.quantile(null, 0.8))
    assert got["p_value"] == pytest.approx((1 + np.sum(null >= acc - 0.5)) / 10)
    assert got["null_max_abs"] == pytest.approx(np.abs(null).max())
    assert got["source_rule_pass"] is bool(np.abs(null).max() < 0.1)


def test_ties_with_the_null_count_against_the_probe():
    """Accuracies are multiples of 1/n_test, so null margins tie the measured one: a tie counts in the
    p-value (>=) and does not pass (>). This seed gives such ties (checked below)."""
    xs, xi = _noise(3)
    train, test = np.arange(10), np.arange(10, 16)
    got = fit_layer(xs, xi, train, test, n_perm=12, quantile=0.6, seed=0)
    acc, null = _by_hand(xs, xi, train, test, 12, 0)
    margin = acc - 0.5
    assert np.sum(null == margin) > 0, "the case must hold a tie to test the boundary"
    assert got["p_value"] == pytest.approx((1 + np.sum(null >= margin)) / 13)
    assert got["passes"] is bool(margin > np.quantile(null, 0.6))


def test_perfect_separation_has_no_errors_and_passes():
    xs, xi = _noise(2, shift=8.0)
    got = fit_layer(xs, xi, np.arange(10), np.arange(10, 16), n_perm=6, quantile=0.95, seed=0)
    assert got["accuracy"] == 1.0 and got["errors"] == 0 and got["passes"] is True
    _, null = _by_hand(xs, xi, np.arange(10), np.arange(10, 16), 6, 0)
    assert got["margin"] == 0.5 and got["p_value"] == pytest.approx((1 + np.sum(null >= 0.5)) / 7)


def test_one_and_zero_permutations():
    xs, xi = _noise(1, shift=0.6)
    train, test = np.arange(10), np.arange(10, 16)
    one = fit_layer(xs, xi, train, test, n_perm=1, quantile=0.95, seed=4)
    assert one["null_sd"] == 0.0 and one["n_perm"] == 1
    none = fit_layer(xs, xi, train, test, n_perm=0, quantile=0.95, seed=4)
    assert (none["passes"], none["null_quantile"], none["source_rule_pass"], none["n_perm"]) == (None, None, None, 0)
    assert "null_band" not in none and "p_value" not in none


def test_describe_layer_words():
    row = {"n_test": 48, "errors": 0, "accuracy": 1.0, "margin": 0.5, "null_band": (-0.125, 0.0625),
           "null_quantile": 0.1, "passes": True}
    assert describe_layer(row) == ("no held-out error in 48; margin +0.500; null central 95% [-0.125, +0.062], "
                                   "95th pct +0.100 -> passes")
    row = {**row, "errors": 3, "accuracy": 0.9375, "margin": 0.4375, "passes": False}
    assert describe_layer(row) == ("accuracy 0.938; margin +0.438; null central 95% [-0.125, +0.062], "
                                   "95th pct +0.100 -> does not pass")
    assert describe_layer({**row, "null_band": None}) == "accuracy 0.938; margin +0.438; no permutation null"
    assert describe_layer({"n_test": 4, "errors": 1, "accuracy": 0.75, "margin": 0.25}) == \
        "accuracy 0.750; margin +0.250; no permutation null"


def test_spec_layers():
    with pytest.raises(ValidationError, match="layer must be >= 0"):
        ProbeSpec(layer=-1)
    with pytest.raises(ValidationError, match="at or deeper than the intervened layer"):
        ProbeSpec(layer=10, read_layers=[9, 12])
    assert ProbeSpec(layer=0).layer == 0
    assert ProbeSpec(layer=10, read_layers=[12, 10]).read_layers == [12, 10]  # the intervened layer itself is fine
    assert ProbeSpec(read_layers=[1]).read_layers == [1]  # no layer given: mid-depth, checked against the model


def test_two_permutations_inside_the_source_band():
    # pure noise (seed 0): both label-shuffled margins lie within 0.1 of zero and differ, so the source's
    # released rule passes and the null SD (ddof 1 over two values) is positive
    rng = np.random.default_rng(0)
    xs, xi = rng.normal(size=(16, 3)), rng.normal(size=(16, 3))
    got = fit_layer(xs, xi, np.arange(10), np.arange(10, 16), n_perm=2, quantile=0.95, seed=0)
    _, null = _by_hand(xs, xi, np.arange(10), np.arange(10, 16), 2, 0)
    assert np.abs(null).max() < 0.1 and got["source_rule_pass"] is True
    assert got["null_sd"] == pytest.approx(np.std(null, ddof=1)) and got["null_sd"] > 0
