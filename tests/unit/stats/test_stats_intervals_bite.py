"""Wilson, the one-sided error-rate bound, the TOST inversion and Benjamini-Hochberg, pinned away
from their easy points: Wilson at other z levels and in the middle of [0, 1] (closed form), the
Clopper-Pearson bound at other confidences (scipy's beta quantile), TOST at a non-default null and
at its strict boundary, BH with NaN cells (hand step-up)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta, norm

from tamperbench.stats.equivalence import equivalence_bound, tost_pvalue
from tamperbench.stats.intervals import error_rate_upper_bound, rule_of_three, wilson
from tamperbench.stats.multiple import benjamini_hochberg


def wilson_by_hand(k, n, z):
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return mid - half, mid + half


@pytest.mark.parametrize("k,n,z", [(1, 10, 1.0), (5, 10, 2.576), (9, 10, 1.645), (1, 2, 1.96), (37, 40, 3.0)])
def test_wilson_closed_form_at_other_levels(k, n, z):
    assert wilson(k, n, z) == pytest.approx(wilson_by_hand(k, n, z), abs=1e-9)


def test_wilson_default_is_95_percent_and_ends_are_exact():
    assert wilson(3, 10) == pytest.approx(wilson_by_hand(3, 10, 1.96), abs=1e-9)
    lo, hi = wilson(0, 7)
    assert lo == 0.0 and hi == pytest.approx(wilson_by_hand(0, 7, 1.96)[1])
    lo, hi = wilson(7, 7)
    assert hi == 1.0 and lo == pytest.approx(wilson_by_hand(7, 7, 1.96)[0])
    assert all(type(x) is float for x in wilson(2, 5))


@pytest.mark.parametrize("k,n", [(-1, 5), (6, 5), (0, -1), (-1, -1)])
def test_wilson_refuses_impossible_counts(k, n):
    with pytest.raises(ValueError, match="wilson"):
        wilson(k, n)


def test_error_rate_bound_at_other_confidences_is_the_beta_quantile():
    assert error_rate_upper_bound(0, 20, confidence=0.99) == pytest.approx(1 - 0.01 ** (1 / 20))
    assert error_rate_upper_bound(3, 40, confidence=0.9) == pytest.approx(beta.ppf(0.9, 4, 37))
    assert error_rate_upper_bound(1, 1000) == pytest.approx(beta.ppf(0.95, 2, 999))
    assert error_rate_upper_bound(4, 5) == pytest.approx(beta.ppf(0.95, 5, 1))
    assert type(error_rate_upper_bound(2, 30)) is float


def test_error_rate_bound_edges():
    assert error_rate_upper_bound(0, 0) == 1.0 and error_rate_upper_bound(0, -3) == 1.0
    assert error_rate_upper_bound(1, 1) == 1.0
    for bad in [(-1, 5), (6, 5)]:
        with pytest.raises(ValueError, match="error_rate_upper_bound"):
            error_rate_upper_bound(*bad)


def test_rule_of_three():
    assert rule_of_three(50) == pytest.approx(0.06) and rule_of_three(0) == 1.0 and rule_of_three(-2) == 1.0
    assert rule_of_three(1) == 3.0


def test_tost_pvalue_by_hand_at_a_non_default_null():
    # theta 0.32, null 0.3, delta 0.05, SE 0.01: upper z = (0.32 - 0.35)/0.01 = -3, lower z = (0.32 - 0.25)/0.01 = 7
    p = tost_pvalue(0.32, 0.01, 0.05, theta0=0.3)
    assert p == pytest.approx(max(norm.cdf(-3), norm.sf(7)))
    # below the null: the lower test is the binding one
    p = tost_pvalue(0.27, 0.01, 0.05, theta0=0.3)
    assert p == pytest.approx(norm.sf((0.27 - 0.25) / 0.01))
    # default null 0.5
    assert tost_pvalue(0.52, 0.02, 0.1) == pytest.approx(norm.cdf((0.52 - 0.6) / 0.02))


def test_tost_pvalue_with_zero_se_is_a_strict_step():
    assert tost_pvalue(0.55, 0.0, 0.1) == 0.0
    assert tost_pvalue(0.45, 0.0, 0.1) == 0.0
    assert tost_pvalue(0.75, 0.0, 0.1) == 1.0 and tost_pvalue(0.25, 0.0, 0.1) == 1.0
    assert tost_pvalue(0.5, 0.0, 0.0) == 1.0  # |0| < 0 is false: a zero margin is never supported
    assert tost_pvalue(0.3, -1.0, 0.05, theta0=0.3) == 0.0
    assert type(tost_pvalue(0.5, 0.1, 0.1)) is float


def test_equivalence_bound_default_alphas_and_a_non_default_null():
    rows = equivalence_bound(0.62, 0.01)
    assert [r["alpha"] for r in rows] == [0.05, 0.01, 0.0001]
    assert [r["z"] for r in rows] == pytest.approx([norm.ppf(0.95), norm.ppf(0.99), norm.ppf(0.9999)])
    assert [r["bound"] for r in rows] == pytest.approx([0.12 + norm.ppf(1 - a) * 0.01 for a in (0.05, 0.01, 0.0001)])
    (r,) = equivalence_bound(0.2, 0.05, alphas=(0.1,), theta0=0.3)
    assert r["bound"] == pytest.approx(0.1 + norm.ppf(0.9) * 0.05)
    assert r["source_bound"] == pytest.approx(-0.1 + norm.ppf(0.9) * 0.05)
    assert set(r) == {"alpha", "z", "bound", "source_bound"}


def test_bh_keeps_nan_cells_out_of_the_family():
    p = [0.01, float("nan"), 0.04, 0.03, float("nan")]
    out = benjamini_hochberg(p, alpha=0.05)
    # m = 3 finite: sorted 0.01, 0.03, 0.04 -> thresholds 0.05/3, 0.1/3, 0.05: all rejected (0.04 <= 0.05)
    assert out["m"] == 3 and out["alpha"] == 0.05
    assert out["reject"] == [True, False, True, True, False]
    # q_(i) = min_{j >= i} p_(j) m / j: 0.03, 0.04 (= min(0.045, 0.04)), 0.04
    assert out["q"][0] == pytest.approx(0.03) and out["q"][2] == pytest.approx(0.04) and out["q"][3] == pytest.approx(0.04)
    assert math.isnan(out["q"][1]) and math.isnan(out["q"][4])
    # with NaN counted as tests (m = 5) 0.04 would need <= 0.03: the family size matters
    assert benjamini_hochberg([0.01, 1.0, 0.04, 0.03, 1.0])["reject"] == [True, False, False, False, False]


def test_bh_default_alpha_and_other_alpha_and_all_nan():
    p = [0.02, 0.03, 0.2]
    assert benjamini_hochberg(p)["reject"] == [True, True, False]  # 0.03 <= 2/3 * 0.05
    assert benjamini_hochberg(p)["alpha"] == 0.05
    tight = benjamini_hochberg(p, alpha=0.03)  # thresholds 0.01, 0.02, 0.03: none
    assert tight["reject"] == [False, False, False] and tight["alpha"] == 0.03
    empty = benjamini_hochberg([float("nan")] * 2)
    assert empty["m"] == 0 and empty["reject"] == [False, False] and all(math.isnan(q) for q in empty["q"])
    assert benjamini_hochberg(np.array([0.5]))["q"] == [0.5]


def test_wilson_at_one_trial_and_exact_one_where_floating_point_falls_short():
    # n = 1 is a real interval, not the n = 0 fallback (0, 1)
    lo, hi = wilson(1, 1)
    assert hi == 1.0 and lo == pytest.approx(wilson_by_hand(1, 1, 1.96)[0]) and lo > 0.2
    assert wilson(0, 1) == (0.0, pytest.approx(wilson_by_hand(0, 1, 1.96)[1]))
    # statsmodels' upper end at 3/3 (z = 2.576) and 6/6 (z = 1) is 1 - 1e-16: the n/n end is exactly 1
    assert wilson(3, 3, 2.576)[1] == 1.0 and wilson(6, 6, 1.0)[1] == 1.0
    # ... and the 0/n end exactly 0 where it is 1e-16 above
    assert wilson(0, 5)[0] == 0.0 and wilson(0, 3, 2.576)[0] == 0.0


def test_error_rate_bound_at_one_trial_and_with_no_trials():
    assert error_rate_upper_bound(0, 1) == pytest.approx(0.95)  # 1 - 0.05^(1/1)
    assert error_rate_upper_bound(0, 2) == pytest.approx(1 - 0.05 ** 0.5)
    # no trials: no information, whatever the error count says (checked before the counts)
    assert error_rate_upper_bound(1, 0) == 1.0 and error_rate_upper_bound(5, -1) == 1.0


def test_bh_reads_missing_p_values_as_nan_and_returns_plain_bools():
    out = benjamini_hochberg([0.01, None, 0.5])  # a cell without a test, as JSON null
    assert out["m"] == 2 and out["reject"] == [True, False, False] and math.isnan(out["q"][1])
    assert all(type(x) is bool for x in out["reject"])  # JSON true/false, not 1.0/0.0
    assert all(type(x) is bool for x in benjamini_hochberg([0.9, float("nan")])["reject"])
