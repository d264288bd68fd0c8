"""Crossed variance components (vs statsmodels MixedLM REML), dose-response m0 (vs statsmodels Logit), rho."""

import itertools

import numpy as np
import pytest
from scipy.special import expit

from tamperbench.stats.dose import dose_response, extraction_ratio, fit_map, zero_dose_margin
from tamperbench.stats.variance import icc_contrasts, iccs, variance_components


def _balanced(rng, sd=(0.9, 0.6, 0.3), reps=3):
    eff = [rng.normal(0, s, n) for s, n in zip(sd, (5, 6, 4))]
    rows = []
    for d, o, s in itertools.product(range(5), range(6), range(4)):
        for _ in range(reps):
            rows.append((d, o, s, eff[0][d] + eff[1][o] + eff[2][s] + rng.normal(0, 1.0)))
    return np.array(rows)


def test_moments_equal_reml_on_a_balanced_crossed_design():
    import pandas as pd
    import statsmodels.formula.api as smf

    a = _balanced(np.random.default_rng(4))
    df = pd.DataFrame(a, columns=["domain", "object", "seed", "y"]).assign(g=1)
    fit = smf.mixedlm("y ~ 1", df, groups="g", re_formula="0",
                      vc_formula={k: f"0 + C({k})" for k in ("domain", "object", "seed")}).fit(reml=True)
    reml = dict(zip(fit.model.exog_vc.names, fit.vcomp))
    mine = variance_components(df.y, {k: df[k] for k in ("domain", "object", "seed")})["sigma2"]
    # balanced design, interior estimates: REML = ANOVA = the pairwise moment estimator
    for k in ("domain", "object", "seed"):
        assert mine[k] == pytest.approx(reml[k], rel=0.02, abs=0.01), (k, mine, reml)
    assert mine["residual"] == pytest.approx(fit.scale, rel=0.02)


def test_one_way_moment_estimator_is_the_anova_estimator():
    rng = np.random.default_rng(8)
    g = np.repeat(np.arange(30), 4)
    y = rng.normal(0, 1, 30)[g] + rng.normal(0, 0.5, g.size)
    v = variance_components(y, {"item": g})["sigma2"]
    means = np.array([y[g == k].mean() for k in range(30)])
    msb = 4 * ((means - y.mean()) ** 2).sum() / 29
    msw = sum(((y[g == k] - means[k]) ** 2).sum() for k in range(30)) / (30 * 3)
    assert v["residual"] == pytest.approx(msw)
    assert v["item"] == pytest.approx((msb - msw) / 4)


def test_iccs_and_contrast_detect_domain_structure_beyond_seed():
    rng = np.random.default_rng(9)
    n_items, rows = 120, []
    dom = rng.normal(0, 1.0, 4)
    for i in range(n_items):
        d, o = i % 4, i % 5
        for s in range(3):
            rows.append((d, o, i, s, dom[d] + rng.normal(0, 1)))
    a = np.array(rows)
    out = icc_contrasts(a[:, 4], {"domain": a[:, 0], "object": a[:, 1], "item": a[:, 2], "seed": a[:, 3]}, n_boot=30)
    assert out["icc"]["domain"]["estimate"] > 0.2
    assert out["delta"]["domain"]["established"] is True
    assert iccs({"a": -0.1, "b": 1.0, "residual": 1.0}) == {"a": 0.0, "b": 0.5}


def test_fixed_part_without_random_effects_is_the_logit_mle():
    from statsmodels.discrete.discrete_model import Logit  # (statsmodels.api imports all of statsmodels)

    rng = np.random.default_rng(10)
    z = np.tile([0.0, 1.0], 1500)
    dose = np.where(z == 1, rng.choice([0.5, 1.0, 2.0], z.size), 0.0)
    knots = np.array([0.5, 1.0, 2.0])
    y = (rng.random(z.size) < expit(-0.3 + z * (0.4 + 0.6 * dose))).astype(float)
    theta = fit_map(y, z, dose, knots, [], [])
    from tamperbench.stats.dose import ramp_basis

    X = np.column_stack([np.ones_like(z), z, z[:, None] * ramp_basis(dose, knots)])
    mle = Logit(y, X).fit(disp=0).params
    assert theta == pytest.approx(mle, abs=2e-4)  # constraint inactive: the same optimum


def test_monotone_term_cannot_decrease():
    rng = np.random.default_rng(11)
    z = np.tile([0.0, 1.0], 1000)
    dose = np.where(z == 1, rng.choice([1.0, 2.0, 3.0], z.size), 0.0)
    y = (rng.random(z.size) < expit(0.2 + z * (1.5 - 0.5 * dose))).astype(float)  # truly decreasing
    theta = fit_map(y, z, dose, np.array([1.0, 2.0, 3.0]), [], [])
    assert np.all(theta[2:] >= 0)


def test_dose_response_recovers_m0_and_declares_identification():
    rng = np.random.default_rng(12)
    items = np.repeat(np.arange(120), 6)
    b = rng.normal(0, 0.5, 120)[items]
    z = np.tile([0.0, 1.0], items.size // 2)
    dose = np.where(z == 1, rng.choice([0.5, 1.0, 2.0], items.size), 0.0)
    y = (rng.random(items.size) < expit(-0.5 + b + z * (0.8 + 0.5 * dose))).astype(float)
    out = dose_response(y, z, dose, groups={"item": items}, cluster=items, n_boot=40, seed=1)
    true_m0 = zero_dose_margin(-0.5, 0.8, 0.5)
    lo, hi = out["m0"]["ci"]
    assert lo <= true_m0 <= hi, (out["m0"], true_m0)
    assert out["identified"] and 0 < out["leakage_share"]["estimate"] < 1 and out["stratified"] is False


def test_the_same_data_and_seed_give_the_same_fit_to_the_last_bit():
    """The random-effect SDs come from a variational Bayes fit whose starting values are random: drawn from the
    seed, two runs agree bit for bit (drawn from OS entropy they did not: another beta0 every run)."""
    rng = np.random.default_rng(14)
    items = np.repeat(np.arange(30), 4)
    z = np.tile([0.0, 1.0], items.size // 2)
    dose = np.where(z == 1, rng.choice([0.5, 2.0], items.size), 0.0)
    y = (rng.random(items.size) < expit(-0.3 + rng.normal(0, 0.7, 30)[items] + z * (0.6 + 0.4 * dose))).astype(float)
    one, two = (dose_response(y, z, dose, groups={"item": items}, cluster=items, n_boot=5, seed=3) for _ in range(2))
    assert one == two and one["sigmas"]["item"] != 1.0  # the VB fit ran (1.0 is its failure fallback)


def test_null_aggregate_margin_is_not_identified_and_single_dose_refuses():
    rng = np.random.default_rng(13)
    items = np.repeat(np.arange(60), 4)
    z = np.tile([0.0, 1.0], items.size // 2)
    dose = np.where(z == 1, rng.choice([1.0, 2.0], items.size), 0.0)
    y = (rng.random(items.size) < 0.4).astype(float)  # no effect at all
    out = dose_response(y, z, dose, cluster=items, n_boot=40)
    assert out["identified"] is False and out["leakage_share"] is None and "includes zero" in out["reason"]
    one = dose_response(y, z, np.where(z == 1, 1.0, 0.0), cluster=items, n_boot=5)
    assert one["identified"] is False and "two are needed" in one["reason"]


def test_zero_dose_margin_integrates_random_effects():
    # sigma = 0: plain difference of inverse logits; sigma > 0 shrinks it (Eq. 11 vs b = 0)
    assert zero_dose_margin(0.0, 1.0, 0.0) == pytest.approx(expit(1.0) - 0.5)
    draws = np.random.default_rng(0).normal(0, 2.0, 400000)
    mc = np.mean(expit(0.3 + 1.0 + draws) - expit(0.3 + draws))
    assert zero_dose_margin(0.3, 1.0, 2.0) == pytest.approx(mc, abs=2e-3)


def test_extraction_ratio():
    r = extraction_ratio(0.0014, (0.0006, 0.0022), 0.458)
    assert r["rho"] == pytest.approx(0.0014 / 0.458) and r["ci"][0] == pytest.approx(0.0006 / 0.458)
    assert extraction_ratio(0.3, (0.2, 0.4), 0.25)["headline"] == 1.0
    assert extraction_ratio(0.1, (0, 0.2), 0.0)["rho"] is None
