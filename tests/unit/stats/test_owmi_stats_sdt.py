"""d', tied AUROC, Wilson and the error-rate bound against closed forms and independent libraries."""

import math

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from tamperbench.stats.intervals import error_rate_upper_bound, rule_of_three, wilson
from tamperbench.stats.sdt import auroc, corrected_rate, dprime, dprime_counts


def test_source_figure_perfect_detector_is_5_15():
    # OWMI Section 7.2: 100/100 hits, 0/100 false alarms -> d' = 5.1517 under the 1/(2N) correction
    assert dprime([1] * 100, [0] * 100) == pytest.approx(5.1517, abs=5e-5)
    assert dprime([1] * 100, [0] * 100) == pytest.approx(2 * norm.ppf(1 - 1 / 200))


def test_dprime_closed_form_and_always_yes_is_zero():
    assert dprime_counts(30, 50, 10, 40) == pytest.approx(norm.ppf(0.6) - norm.ppf(0.25))
    assert dprime([1] * 20, [1] * 20) == 0.0  # acquiescence: H = F = 1 -> d' = 0
    assert dprime([0] * 7, [0] * 7) == 0.0
    assert math.isnan(dprime([], [1]))


def test_corrected_rate_uses_each_rates_own_n():
    assert corrected_rate(0, 10) == pytest.approx(0.05)
    assert corrected_rate(10, 10) == pytest.approx(0.95)
    assert corrected_rate(3, 10) == pytest.approx(0.3)


def test_auroc_matches_sklearn_with_ties():
    rng = np.random.default_rng(7)
    for _ in range(20):
        a = rng.integers(0, 5, rng.integers(1, 60)) / 4
        b = rng.integers(0, 5, rng.integers(1, 60)) / 4
        y = np.r_[np.ones(a.size), np.zeros(b.size)]
        assert auroc(a, b) == pytest.approx(roc_auc_score(y, np.r_[a, b]))


def test_auroc_constant_report_is_one_half_and_binary_form():
    assert auroc([1, 1, 1], [1, 1]) == 0.5  # source: AUROC 0.5 for a constant report
    assert auroc([0.3] * 4, [0.3] * 9) == 0.5
    # binary reports: AUROC = 1/2 + (H - F)/2 exactly
    assert auroc([1, 1, 1, 0], [1, 0, 0, 0]) == pytest.approx(0.5 + (0.75 - 0.25) / 2)
    assert auroc([1], [0]) == 1.0 and math.isnan(auroc([], [0]))


def test_wilson_closed_form_and_edges():
    for k, n in [(3, 10), (0, 10), (10, 10), (57, 211)]:
        p, z = k / n, 1.96
        den = 1 + z * z / n
        mid = (p + z * z / (2 * n)) / den
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
        lo, hi = wilson(k, n, z)
        assert lo == pytest.approx(max(0, mid - half), abs=1e-6) and hi == pytest.approx(min(1, mid + half), abs=1e-6)
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    with pytest.raises(ValueError):
        wilson(5, 3)


def test_quote_tables_reexports_the_same_wilson():
    from tamperbench.quote import tables

    assert tables.wilson is wilson


def test_error_rate_bound_zero_errors_is_exact_and_near_rule_of_three():
    # 0 errors in n: the one-sided 95% Clopper-Pearson bound is 1 - 0.05^(1/n)
    assert error_rate_upper_bound(0, 100) == pytest.approx(1 - 0.05 ** (1 / 100))
    assert error_rate_upper_bound(0, 100) < rule_of_three(100) == 0.03
    # k > 0: the upper end is the beta quantile
    from scipy.stats import beta

    assert error_rate_upper_bound(2, 50) == pytest.approx(beta.ppf(0.95, 3, 48))
    assert error_rate_upper_bound(5, 5) == 1.0
