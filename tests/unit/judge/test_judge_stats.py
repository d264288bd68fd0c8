"""Cohen's and Fleiss' kappa."""

import numpy as np
import pytest

from tamperbench.stats.agreement import cohen_kappa, fleiss_kappa, fleiss_kappa_from_ratings, percent_agreement

# Fleiss (1971)-style worked example (Wikipedia "Fleiss' kappa"): 10 subjects, 14 raters, 5 categories.
WIKI = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def test_fleiss_matches_worked_example():
    assert fleiss_kappa(WIKI) == pytest.approx(0.20993, abs=1e-4)


def test_fleiss_perfect_and_undefined():
    assert fleiss_kappa([[3, 0], [0, 3], [3, 0]]) == pytest.approx(1.0)
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # everyone always says the same thing: 0/0
    assert fleiss_kappa(np.zeros((0, 2))) is None


def test_fleiss_two_raters_close_to_scott_pi():
    # With two raters Fleiss' kappa equals Scott's pi; compute pi by hand.
    a = [True, True, False, False, True, False]
    b = [True, False, False, False, True, True]
    po = percent_agreement(a, b)
    p_true = (sum(a) + sum(b)) / 12
    pe = p_true**2 + (1 - p_true) ** 2
    assert fleiss_kappa_from_ratings(list(zip(a, b))) == pytest.approx((po - pe) / (1 - pe))


def test_fleiss_rejects_uneven_rows():
    with pytest.raises(ValueError):
        fleiss_kappa([[2, 0], [1, 0]])


def test_cohen():
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == pytest.approx(1.0)
    assert cohen_kappa([True, True, False, False], [True, False, True, False]) == pytest.approx(0.0)
    assert cohen_kappa([True, True], [True, True]) is None
    assert cohen_kappa([], []) is None
