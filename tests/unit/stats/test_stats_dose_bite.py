"""The dose model's pure parts pinned by hand: the ramp basis at and between its knots, the
design matrix, Eq. 11 against scipy's quadrature, the penalised fit's weights and prior, the
extraction ratio's every branch, and dose_response's refusals. All quick: no bootstrap refit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate
from scipy.special import expit
from scipy.stats import norm

from tamperbench.stats.dose import _design, dose_response, extraction_ratio, fit_map, ramp_basis, zero_dose_margin


def test_ramp_basis_by_hand():
    knots = np.array([0.5, 1.0, 2.0, 4.0])
    dose = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 9.0])
    got = ramp_basis(dose, knots)
    # h2 = min(d, 1) / 0.5; h3 = clip((d - 1) / 1, 0, 1); h4 = clip((d - 2) / 2, 0, 1)
    want = np.array([[0, 0, 0], [0.5, 0, 0], [1, 0, 0], [1.5, 0, 0], [2, 0, 0], [2, 0.5, 0], [2, 1, 0],
                     [2, 1, 0.5], [2, 1, 1], [2, 1, 1]])
    assert got == pytest.approx(want)
    assert ramp_basis(np.array([0.0, 1.0, 3.0]), np.array([1.0, 2.0])) == pytest.approx(np.array([[0.0], [1.0], [2.0]]))


def test_design_has_intercept_z_dose_terms_then_one_column_per_level():
    z = np.array([0.0, 1.0, 1.0])
    dose = np.array([0.0, 1.0, 2.0])
    X, n_fixed, sizes = _design(z, dose, np.array([1.0, 2.0]), [np.array([0, 1, 1]), np.array([2, 0, 1])])
    assert n_fixed == 3 and sizes == [2, 3]
    assert X.toarray() == pytest.approx(np.array([[1, 0, 0, 1, 0, 0, 0, 1],
                                                  [1, 1, 1, 0, 1, 1, 0, 0],
                                                  [1, 1, 2, 0, 1, 0, 1, 0]]))
    X0, n0, s0 = _design(z, dose, np.array([1.0, 2.0]), [])
    assert X0.shape == (3, 3) and n0 == 3 and s0 == []


@pytest.mark.parametrize("b0,b1,sigma", [(0.3, 1.0, 2.0), (-1.0, 0.5, 0.7), (0.0, -0.4, 1.5)])
def test_zero_dose_margin_is_the_gaussian_integral(b0, b1, sigma):
    want, _ = integrate.quad(lambda b: (expit(b0 + b1 + b) - expit(b0 + b)) * norm.pdf(b, scale=sigma), -12 * sigma,
                             12 * sigma)
    assert zero_dose_margin(b0, b1, sigma) == pytest.approx(want, abs=1e-7)
    assert zero_dose_margin(b0, b1, sigma, n_nodes=80) == pytest.approx(want, abs=1e-9)


def test_fit_map_weights_count_rows_and_the_prior_shrinks_levels():
    rng = np.random.default_rng(2)
    z = np.tile([0.0, 1.0], 60)
    dose = np.where(z == 1, np.tile([1.0, 1.0, 2.0, 2.0], 30), 0.0)
    y = (rng.random(z.size) < expit(-0.2 + z * 0.9)).astype(float)
    knots = np.array([1.0, 2.0])
    w = rng.integers(0, 3, z.size).astype(float)
    rep = np.repeat(np.arange(z.size), w.astype(int))
    weighted = fit_map(y, z, dose, knots, [], [], weights=w)
    repeated = fit_map(y[rep], z[rep], dose[rep], knots, [], [])
    assert weighted == pytest.approx(repeated, abs=1e-4)  # a weight of 2 is the row twice
    g = np.repeat(np.arange(4), 30)
    y2 = (rng.random(z.size) < expit(np.array([-2.0, -0.5, 0.5, 2.0])[g])).astype(float)
    loose = fit_map(y2, z, dose, knots, [g], [5.0])[3:]
    tight = fit_map(y2, z, dose, knots, [g], [0.05])[3:]
    assert np.ptp(tight) < 0.2 * np.ptp(loose) and loose.size == 4


def test_extraction_ratio_every_branch():
    r = extraction_ratio(0.2, (0.1, 0.3), 0.4)
    assert r == {"rho": pytest.approx(0.5), "ci": (pytest.approx(0.25), pytest.approx(0.75)),
                 "headline": pytest.approx(0.5), "reason": ""}
    assert extraction_ratio(-0.1, (-0.2, 0.0), 0.5)["headline"] == 0.0  # raw rho stays negative
    assert extraction_ratio(-0.1, (-0.2, 0.0), 0.5)["rho"] == pytest.approx(-0.2)
    none = extraction_ratio(0.1, (0.0, 0.2), -0.3)
    assert none == {"rho": None, "reason": "probe margin <= 0: nothing linearly available; site excluded"}
    assert extraction_ratio(0.1, (0.0, 0.2), float("nan"))["rho"] is None


def test_dose_response_refusals():
    with pytest.raises(ValueError, match="non-negative"):
        dose_response([1, 0], [1, 0], [-0.5, 0.0], cluster=["a", "b"])
    out = dose_response([1, 0], [1, 1], [1.0, 2.0], cluster=["a", "b"])
    assert out == {"identified": False, "reason": "no intervention and sham rows to contrast", "stratified": False}
    # the used-object stratum keeps only flagged rows: here no sham is left
    out = dose_response([1, 0, 1], [1, 0, 1], [1.0, 0.0, 2.0], cluster=["a", "b", "c"], used=[True, False, True])
    assert out["identified"] is False and out["stratified"] is True and "no intervention and sham" in out["reason"]
    one = dose_response([1, 0, 1, 0], [1, 0, 1, 0], [2.0, 0.0, 2.0, 0.0], cluster=list("abcd"))
    assert one == {"identified": False, "stratified": False, "m0": None, "leakage_share": None,
                   "reason": "1 positive dose level(s): at least two are needed to extrapolate to zero dose"}
