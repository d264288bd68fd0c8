"""Brier, equal-mass ECE and selective AUROC at the points the existing tests skip: the [0, 1]
bounds themselves, one-class outcomes, empty input, fewer answers than bins, the default bin count
and tied confidences (the stable sort). Every expected value is worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tamperbench.stats.calibration import brier, ece_equal_mass, selective_auroc


def test_bounds_zero_and_one_are_valid_confidences_and_outside_is_refused():
    assert brier([0.0, 1.0], [0, 1]) == 0.0
    assert brier([1.0, 0.0], [0, 1]) == 1.0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        brier([-0.01, 0.5], [0, 1])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ece_equal_mass([0.5, 1.01], [0, 1])
    with pytest.raises(ValueError, match="differ in length"):
        ece_equal_mass([0.5, 0.2], [1])


def test_brier_with_one_outcome_class_is_the_mean_square():
    # scikit-learn needs both classes; the fallback must be the same formula
    assert brier([0.9, 0.6], [1, 1]) == pytest.approx((0.01 + 0.16) / 2)
    assert brier([0.3, 0.1, 0.2], [0, 0, 0]) == pytest.approx((0.09 + 0.01 + 0.04) / 3)
    assert brier([0.25, 0.75], [1, 0]) == pytest.approx(0.5625)
    assert type(brier([0.2], [1])) is float
    assert math.isnan(brier([], []))


def test_ece_empty_and_fewer_answers_than_bins():
    assert math.isnan(ece_equal_mass([], []))
    # 3 answers, 10 bins: one answer per bin -> mean |y - p|
    assert ece_equal_mass([0.9, 0.2, 0.6], [1, 1, 0]) == pytest.approx((0.1 + 0.8 + 0.6) / 3)


def test_ece_default_is_ten_equal_mass_bins():
    # 20 answers sorted by confidence: bins of two. Confidence pairs (0.05k, 0.05k + 0.05/2)...
    p = np.repeat(np.linspace(0.05, 0.95, 10), 2)
    y = np.tile([1, 0], 10)  # each bin: accuracy 1/2
    want = np.mean(np.abs(0.5 - np.linspace(0.05, 0.95, 10)))
    assert ece_equal_mass(p, y) == pytest.approx(want)
    # with 5 bins of four (two confidence levels each) the gaps average differently
    assert ece_equal_mass(p, y, n_bins=5) == pytest.approx(np.mean(np.abs(0.5 - (np.linspace(0.05, 0.95, 10).reshape(5, 2).mean(axis=1)))))


def test_ece_weights_bins_by_their_size():
    # 5 answers, 2 bins: sizes 3 and 2 (numpy's array_split) -> weights 3/5 and 2/5
    p = [0.1, 0.2, 0.3, 0.8, 0.9]
    y = [0, 0, 0, 1, 1]
    assert ece_equal_mass(p, y, n_bins=2) == pytest.approx(3 / 5 * 0.2 + 2 / 5 * 0.15)


def ece_by_hand(p, y, n_bins):
    """Python's sorted() is stable: ties keep input order; bins of consecutive runs, the first
    n % n_bins of them one longer."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    k = min(n_bins, len(p))
    size, extra = divmod(len(p), k)
    total, start = 0.0, 0
    for b in range(k):
        part = order[start:start + size + (b < extra)]
        start += len(part)
        total += len(part) / len(p) * abs(sum(y[i] for i in part) / len(part) - sum(p[i] for i in part) / len(part))
    return total


def test_ece_ties_are_binned_in_input_order():
    # 40 confidences on three levels: bins cut through runs of ties, so which tied answers land in
    # which bin changes the ECE; the stable sort keeps them in input order (numpy's default
    # quicksort does not, on this data)
    rng = np.random.default_rng(0)
    p = (rng.integers(0, 3, 40) / 4).tolist()
    y = rng.integers(0, 2, 40).tolist()
    assert ece_equal_mass(p, y, n_bins=7) == pytest.approx(ece_by_hand(p, y, 7), abs=1e-12)
    p = [0.5] * 40
    y = [1] * 20 + [0] * 20
    assert ece_equal_mass(p, y, n_bins=2) == pytest.approx(0.5)  # bins: all right, all wrong


def test_selective_auroc_by_hand_with_ties_and_nan_when_one_class():
    # right: 0.9, 0.5; wrong: 0.5, 0.1 -> (1 + 1 + 0.5 + 1) / 4
    assert selective_auroc([0.9, 0.5, 0.5, 0.1], [1, 1, 0, 0]) == pytest.approx(3.5 / 4)
    assert selective_auroc([0.1, 0.9], [1, 0]) == 0.0
    assert math.isnan(selective_auroc([0.3, 0.4], [0, 0]))


def test_refusals_are_the_exact_lines():
    with pytest.raises(ValueError, match=r"^confidence and outcome arrays differ in length$"):
        brier([0.5], [1, 0])
    with pytest.raises(ValueError, match=r"^confidence must lie in \[0, 1\]$"):
        selective_auroc([2.0], [1])


def test_single_answer_and_missing_values_read_as_nan():
    assert brier([0.2], [1]) == pytest.approx(0.64) and brier([0.2], [0]) == pytest.approx(0.04)
    assert ece_equal_mass([0.2], [1]) == pytest.approx(0.8)
    # an unreported confidence or outcome (None) is NaN and propagates: never dropped, never an error
    assert math.isnan(ece_equal_mass([0.2, None], [1, 0]))
    assert math.isnan(ece_equal_mass([0.2, 0.4], [1, None]))
