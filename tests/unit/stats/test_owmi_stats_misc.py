"""TOST inversion, calibration, pairing codings, BH: against statsmodels, scikit-learn, closed forms."""

import numpy as np
import pytest
from scipy.stats import norm

from tamperbench.stats.calibration import brier, ece_equal_mass, selective_auroc
from tamperbench.stats.equivalence import equivalence_bound, tost_pvalue
from tamperbench.stats.multiple import benjamini_hochberg
from tamperbench.stats.pairs import control_margin, paired_detection, parse_rates


def test_tost_inversion_agrees_with_statsmodels_ztost():
    from statsmodels.stats.weightstats import ztost

    rng = np.random.default_rng(1)
    x = rng.normal(0.503, 0.05, 500)
    se = x.std(ddof=1) / np.sqrt(x.size)
    for row in equivalence_bound(float(x.mean()), se, alphas=(0.05, 0.01)):
        d = row["bound"]
        # at the inverted margin the TOST p-value is exactly alpha (statsmodels, raw data)
        p_sm = ztost(x, 0.5 - d, 0.5 + d)[0]
        assert p_sm == pytest.approx(row["alpha"], rel=1e-6)
        assert tost_pvalue(float(x.mean()), se, d) == pytest.approx(row["alpha"], rel=1e-6)
        # a slightly tighter margin no longer rejects
        assert ztost(x, 0.5 - 0.99 * d, 0.5 + 0.99 * d)[0] > row["alpha"]


def test_equivalence_bound_source_numbers_and_sign():
    # Section 3.5: bound = |theta - 0.5| + z_{1-alpha} SE; the source's signed form differs below chance
    b = equivalence_bound(0.4990, 0.0002, alphas=(0.05,))[0]
    assert b["bound"] == pytest.approx(0.0010 + norm.ppf(0.95) * 0.0002)
    assert b["source_bound"] == pytest.approx(-0.0010 + norm.ppf(0.95) * 0.0002)
    assert equivalence_bound(0.5, 0.0, alphas=(0.05,))[0]["bound"] == 0.0  # collapsed bootstrap


def test_brier_and_ece_closed_forms():
    p = np.array([0.1, 0.2, 0.3, 0.6, 0.8, 0.9])
    y = np.array([0, 0, 1, 1, 1, 0])
    assert brier(p, y) == pytest.approx(np.mean((p - y) ** 2))
    # three equal-mass bins of two: |acc - conf| = |0 - .15|, |1 - .45|, |.5 - .85|, each weight 1/3
    assert ece_equal_mass(p, y, n_bins=3) == pytest.approx((0.15 + 0.55 + 0.35) / 3)
    # perfectly calibrated within one bin -> 0
    assert ece_equal_mass([0.5, 0.5], [0, 1], n_bins=1) == pytest.approx(0.0)
    with pytest.raises(ValueError):
        brier([1.2], [1])


def test_ece_matches_sklearn_calibration_curve_when_bins_are_unique():
    from sklearn.calibration import calibration_curve

    rng = np.random.default_rng(2)
    p = rng.random(1000)
    y = (rng.random(1000) < p ** 1.5).astype(int)
    acc, conf = calibration_curve(y, p, n_bins=10, strategy="quantile")
    assert ece_equal_mass(p, y, 10) == pytest.approx(np.mean(np.abs(acc - conf)), abs=1e-12)


def test_selective_auroc():
    assert selective_auroc([0.9, 0.8, 0.2, 0.1], [1, 1, 0, 0]) == 1.0
    assert selective_auroc([0.7, 0.7, 0.7], [1, 0, 1]) == 0.5  # constant confidence
    assert np.isnan(selective_auroc([0.7, 0.2], [1, 1]))  # always right: undefined


def _row(pid, cond, ok, det=None, item="i", graded=None):
    return {"pair_id": pid, "condition": cond, "parse_ok": ok, "detected": det, "graded": graded, "item_id": item}


def test_codings_complete_vs_inclusive_and_reasons():
    rows = [
        _row("p1", "intervention", True, True), _row("p1", "sham", True, False),
        _row("p2", "intervention", False), _row("p2", "sham", True, True),
        _row("p3", "intervention", True, True),  # sham missing
        _row("p4", "intervention", False), _row("p4", "sham", False),
    ]
    c = paired_detection(rows, coding="complete")
    assert c["pair_ids"] == ["p1"] and c["y_a"] == [1.0] and c["y_b"] == [0.0]
    assert c["excluded"] == {"intervention_unparsed": 1, "missing_sham": 1, "both_unparsed": 1}
    i = paired_detection(rows, coding="inclusive")
    assert i["pair_ids"] == ["p1", "p2", "p4"] and i["y_a"] == [1.0, 0.0, 0.0] and i["y_b"] == [0.0, 1.0, 0.0]
    assert i["excluded"] == {"missing_sham": 1}


def test_every_pair_unparseable_gives_no_complete_pair():
    rows = [_row(f"p{k}", c, False) for k in range(5) for c in ("intervention", "sham")]
    assert paired_detection(rows)["pair_ids"] == []
    assert paired_detection(rows, coding="inclusive")["y_a"] == [0.0] * 5
    rates = parse_rates(rows, by=["condition"])
    assert [(r["parsed"], r["attempted"], r["rate"]) for r in rates] == [(0, 5, 0.0), (0, 5, 0.0)]


def test_parse_rates_with_wilson():
    rows = [_row("p", "sham", k < 3) for k in range(10)]
    (r,) = parse_rates(rows, by=["condition"])
    assert (r["parsed"], r["attempted"]) == (3, 10) and r["ci95"][0] < 0.3 < r["ci95"][1]


def test_control_margins_random_and_observer_max():
    rows = [
        _row("p1", "intervention", True, graded=0.6), _row("p1", "random_matched", True, graded=0.2),
        {**_row("p1", "observer", True, graded=0.5), "observer_tier": 1},
        {**_row("p1", "observer", True, graded=0.7), "observer_tier": 3},
        _row("p2", "intervention", True, graded=0.1), _row("p2", "random_matched", False),
    ]
    r = control_margin(rows, "random_matched")
    assert r["diffs"] == [pytest.approx(0.4)] and r["excluded"] == {"unparsed": 1}
    o = control_margin(rows, ["observer"])
    assert o["diffs"] == [pytest.approx(0.6 - 0.7)]  # against the best observer tier


def test_bh_against_hand_computed_step_up():
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    out = benjamini_hochberg(p, alpha=0.05)
    # step-up: largest k with p_(k) <= k/m * alpha: k=2 (0.008 <= 0.01); 0.039 > 0.015
    assert out["reject"] == [True, True] + [False] * 8
    q = np.minimum.accumulate((np.array(p) * 10 / np.arange(1, 11))[::-1])[::-1]
    assert out["q"] == pytest.approx(list(q))
