"""dose_response's whole output pinned against independent computations (issue 17, stats/dose.py).

Without random effects the penalised fit is the plain logistic MLE whenever the monotone
constraint is slack, so every number has an outside reference: statsmodels' GLM (frequency
weights for each bootstrap replicate) gives beta0, beta1, gamma and each replicate's m0 =
expit(b0 + b1) - expit(b0); the cluster bootstrap is redrawn here with numpy (n_clusters uniform
draws with replacement per replicate from ``default_rng(seed)``); intervals are numpy quantiles.
With random effects: the VB standard deviations equal statsmodels' BinomialBayesMixedGLM built
from explicit matrices (no formula), and m0 is Eq. 11's Gaussian integral by scipy quadrature.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from statsmodels.genmod import families
from statsmodels.genmod.generalized_linear_model import GLM  # statsmodels.api would import all of statsmodels
from scipy import integrate
from scipy.special import expit
from scipy.stats import norm

from tamperbench.stats.dose import _vb_sigmas, dose_response, ramp_basis

KEYS = {"stratified", "n", "knots", "sigmas", "beta0", "beta1", "gamma", "m0", "m_bar", "identified", "reason",
        "leakage_share"}


def _no_groups_data():
    """40 items x (2 sham, 1 intervention at dose 0, 3 at dose 1, 3 at dose 2); logits -1.5 / -1 / 0.5 / 2.

    Sham rows carry a nominal dose of 0.5 (a sham has no dose: it must not become a knot), and the
    dose-0 intervention rows must not either."""
    rng = np.random.default_rng(21)
    z = np.array([0, 0, 1, 1, 1, 1, 1, 1, 1] * 40, dtype=float)
    dose = np.array([0.5, 0.5, 0.0, 1, 1, 1, 2, 2, 2] * 40, dtype=float)
    items = np.repeat(np.arange(40), 9)
    logit = -1.5 + z * (0.5 + 1.5 * np.minimum(dose, 2.0))
    y = (rng.random(z.size) < expit(logit)).astype(float)
    return y, z, dose, items


def _weights(items, n_boot, seed):
    """The cluster bootstrap by hand: per replicate, n_clusters cluster draws with replacement."""
    labels, codes = np.unique(items.astype(str), return_inverse=True)
    draws = np.random.default_rng(seed).integers(0, labels.size, size=(n_boot, labels.size))
    counts = np.stack([np.bincount(d, minlength=labels.size) for d in draws])
    return counts[:, codes].astype(float)


def _glm(y, z, dose, w=None):
    X = np.column_stack([np.ones_like(z), z, z * np.minimum(dose * (z == 1), 2.0)])  # h_2 = min(d, t_2)/(t_2 - t_1)
    return GLM(y, X, family=families.Binomial(), freq_weights=w).fit(tol=1e-12).params


def _margin(w, y, z):
    return (w * z) @ y / (w * z).sum() - (w * (1 - z)) @ y / (w * (1 - z)).sum()


def test_every_output_field_equals_the_logit_mle_and_a_hand_bootstrap():
    y, z, dose, items = _no_groups_data()
    n_boot, seed, level = 30, 3, 0.9
    out = dose_response(y, z, dose, cluster=items, n_boot=n_boot, seed=seed, level=level)
    assert set(out) == KEYS
    b0, b1, g = _glm(y, z, dose)
    W = _weights(items, n_boot, seed)
    reps = np.array([_glm(y, z, dose, w) for w in W])
    assert reps[:, 2].min() > 0.3  # the monotone constraint is slack in every replicate: MAP = MLE
    m0_reps = expit(reps[:, 0] + reps[:, 1]) - expit(reps[:, 0])
    mb_reps = np.array([_margin(w, y, z) for w in W])
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    m0, m_bar = expit(b0 + b1) - expit(b0), y[z == 1].mean() - y[z == 0].mean()
    assert out["stratified"] is False and out["n"] == 360 and out["knots"] == [1.0, 2.0] and out["sigmas"] == {}
    assert (out["beta0"], out["beta1"]) == (pytest.approx(b0, abs=2e-4), pytest.approx(b1, abs=2e-4))
    assert out["gamma"] == [pytest.approx(g, abs=2e-4)]
    assert out["m0"]["estimate"] == pytest.approx(m0, abs=1e-5)
    assert out["m0"]["ci"] == pytest.approx(tuple(np.quantile(m0_reps, q)), abs=1e-4)
    assert out["m_bar"] == {"estimate": pytest.approx(m_bar, abs=1e-12),
                            "ci": pytest.approx(tuple(np.quantile(mb_reps, q)), abs=1e-12)}
    assert out["identified"] is True and out["reason"] == ""
    lam = out["leakage_share"]
    assert lam["estimate"] == pytest.approx(1 - m0 / m_bar, abs=1e-4)
    assert lam["ci"] == pytest.approx(tuple(np.quantile(1 - m0_reps / mb_reps, q)), abs=1e-3)
    assert lam["headline"] == min(1.0, max(0.0, lam["estimate"]))
    assert 0 < lam["estimate"] < 1 and lam["ci"][0] < lam["estimate"] < lam["ci"][1]


def test_defaults_are_200_replicates_seed_0_and_95_percent():
    y, z, dose, items = _no_groups_data()
    keep = items < 12
    y, z, dose, items = y[keep], z[keep], dose[keep], items[keep]
    out = dose_response(y, z, dose, cluster=items)
    mb_reps = np.array([_margin(w, y, z) for w in _weights(items, 200, 0)])
    assert out["m_bar"]["ci"] == pytest.approx(tuple(np.quantile(mb_reps, [0.025, 0.975])), abs=1e-12)


def _paired(diffs):
    """One intervention (dose 1 or 2) and one sham row per item, with the given y_int - y_sham."""
    y = np.array([[1.0, 0.0] if d == 1 else [0.0, 1.0] if d == -1 else [1.0, 1.0] for d in diffs]).ravel()
    z = np.tile([1.0, 0.0], len(diffs))
    dose = np.array([[1.0 + i % 2, 0.0] for i in range(len(diffs))]).ravel()
    return y, z, dose, np.repeat(np.arange(len(diffs)), 2)


@pytest.mark.parametrize("sign", [1, -1])
def test_an_interval_ending_exactly_at_zero_includes_zero(sign):
    # 1 item in 12 moves the margin; 0.92^12 = 37% of replicates miss it: that end is exactly 0
    y, z, dose, items = _paired([sign] + [0] * 11)
    out = dose_response(y, z, dose, cluster=items, n_boot=60, seed=2)
    lo, hi = out["m_bar"]["ci"]
    assert (lo == 0.0 < hi) if sign == 1 else (lo < 0.0 == hi)
    assert out["identified"] is False and out["leakage_share"] is None
    assert out["reason"] == (f"aggregate margin interval [{lo:.4f}, {hi:.4f}] includes zero: "
                             "lambda = 1 - m0/m_bar is not identified")


def test_a_replicate_without_sham_rows_is_nan_without_a_warning():
    # every row its own cluster: some replicates draw no sham row; their margin is NaN, left out, silently
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    z = np.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    dose = np.array([1.0, 2.0, 1.0, 2.0, 0.0, 0.0, 1.0, 2.0])
    assert (_weights(np.arange(8), 40, 0)[:, 4:6].sum(axis=1) == 0).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = dose_response(y, z, dose, cluster=np.arange(8), n_boot=40, seed=0)
    assert np.isfinite(out["m_bar"]["ci"]).all()


def _grouped_data():
    rng = np.random.default_rng(5)
    items = np.repeat(np.arange(30), 6)
    ops = np.tile(["resid", "attn", "mlp"], items.size // 3)
    z = np.tile([0.0, 1.0], items.size // 2)
    dose = np.where(z == 1, np.tile([1.0, 2.0, 3.0], items.size // 3), 0.0)
    b = rng.normal(0, 1.0, 30)[items] + np.where(ops == "attn", 0.4, 0.0)
    y = (rng.random(items.size) < expit(-0.3 + b + z * (0.5 + 0.4 * dose))).astype(float)
    return y, z, dose, items, ops


def _vb_by_matrices(y, z, dose, knots, groups):
    """statsmodels' VB fit from explicit design matrices (no formula): the reference for the SDs."""
    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM

    X = np.column_stack([np.ones_like(z), z, z[:, None] * ramp_basis(dose, knots)])
    cols, ident = [], []
    for j, g in enumerate(groups):
        for level in np.unique(g):
            cols.append((g == level).astype(float))
            ident.append(j)
    return np.exp(BinomialBayesMixedGLM(y, X, np.column_stack(cols), np.array(ident)).fit_vb().vcp_mean)


def test_random_effect_sds_are_statsmodels_vb_and_m0_integrates_them():
    y, z, dose, items, ops = _grouped_data()
    out = dose_response(y, z, dose, groups={"item": items, "operator": ops}, cluster=items, n_boot=4, seed=1)
    want = _vb_by_matrices(y, z, dose, np.array([1.0, 2.0, 3.0]), [items, ops])
    assert list(out["sigmas"]) == ["item", "operator"]
    assert list(out["sigmas"].values()) == pytest.approx(want, rel=1e-4)
    assert out["knots"] == [1.0, 2.0, 3.0] and len(out["gamma"]) == 2 and min(out["gamma"]) >= 0
    s = float(np.sqrt((want ** 2).sum()))
    b0, b1 = out["beta0"], out["beta1"]
    m0, _ = integrate.quad(lambda b: (expit(b0 + b1 + b) - expit(b0 + b)) * norm.pdf(b, scale=s), -12 * s, 12 * s)
    assert out["m0"]["estimate"] == pytest.approx(m0, abs=1e-6)


def test_vb_sigmas_fall_back_to_one_when_the_fit_fails():
    y, z, dose, items, _ = _grouped_data()
    basis = ramp_basis(dose, np.array([1.0, 2.0, 3.0]))
    assert _vb_sigmas(np.full(y.size, np.nan), z, basis, {"item": items, "op": items % 3}, 0) == [1.0, 1.0]
    assert _vb_sigmas(y, z, basis, {}, 0) == []


def test_the_used_stratum_is_the_same_fit_on_the_kept_rows():
    y, z, dose, items, ops = _grouped_data()
    used = (np.arange(y.size) % 5 != 0).astype(int)  # a 0/1 column, as read from a table
    keep = used.astype(bool)
    kw = dict(n_boot=4, seed=1)
    strat = dose_response(y, z, dose, groups={"item": items, "operator": ops}, cluster=items, used=used, **kw)
    plain = dose_response(y[keep], z[keep], dose[keep], groups={"item": items[keep], "operator": ops[keep]},
                          cluster=items[keep], **kw)
    assert strat["stratified"] is True and plain["stratified"] is False and strat["n"] == keep.sum() == 144
    assert set(strat) == set(plain) == KEYS and strat["identified"] == plain["identified"] and strat["reason"] == plain["reason"]
    assert _numbers(strat) == pytest.approx(_numbers(plain), rel=1e-5, abs=1e-6)  # (VB's last digits vary)


def _numbers(out: dict) -> list[float]:
    flat = [out["n"], *out["knots"], *out["sigmas"].values(), out["beta0"], out["beta1"], *out["gamma"]]
    for k in ("m0", "m_bar"):
        flat += [out[k]["estimate"], *out[k]["ci"]]
    if out["leakage_share"] is not None:
        flat += [out["leakage_share"]["estimate"], *out["leakage_share"]["ci"], out["leakage_share"]["headline"]]
    return flat


def test_zero_dose_margin_defaults_to_40_gauss_hermite_nodes():
    from tamperbench.stats.dose import zero_dose_margin

    for s in (3.0, 30.0):  # wide: 40 and 41 nodes differ in the 6th digit
        assert zero_dose_margin(0.3, 1.0, s) == zero_dose_margin(0.3, 1.0, s, n_nodes=40)
        assert zero_dose_margin(0.3, 1.0, s) != zero_dose_margin(0.3, 1.0, s, n_nodes=41)


def test_fit_map_is_the_mode_under_a_normal_prior_with_the_given_sd():
    """At the penalised optimum the score equations hold (checked by hand with dense one-hot
    columns): X_f' (y - p) = 0 for the free fixed effects and X_g' (y - p) = r_g / sigma_g^2 for
    each level's intercept (to L-BFGS-B's tolerance, ~1e-3 here)."""
    from tamperbench.stats.dose import fit_map

    y, z, dose, items, ops = _grouped_data()
    knots = np.array([1.0, 2.0, 3.0])
    op_codes = np.unique(ops, return_inverse=True)[1]
    for sigmas in ([0.7, 0.3], [1.5, 0.5]):
        theta = fit_map(y, z, dose, knots, [items, op_codes], sigmas)
        Xf = np.column_stack([np.ones_like(z), z, z[:, None] * ramp_basis(dose, knots)])
        Xg = [np.column_stack([(g == k).astype(float) for k in range(g.max() + 1)]) for g in (items, op_codes)]
        p = expit(np.column_stack([Xf, *Xg]) @ theta)
        free = [0, 1] + [2 + j for j in range(knots.size - 1) if theta[2 + j] > 1e-6]
        assert Xf[:, free].T @ (y - p) == pytest.approx(0.0, abs=2e-3)
        r_items, r_ops = theta[4:4 + 30], theta[4 + 30:]
        assert Xg[0].T @ (y - p) == pytest.approx(r_items / sigmas[0] ** 2, abs=2e-3)
        assert Xg[1].T @ (y - p) == pytest.approx(r_ops / sigmas[1] ** 2, abs=2e-3)


def test_leakage_above_one_is_reported_raw_and_headlined_at_one():
    # a negative zero-dose margin (b1 = -1) under a positive aggregate margin: lambda > 1
    rng = np.random.default_rng(4)
    z = np.array([0, 0, 1, 1, 1, 1] * 60, dtype=float)
    dose = np.array([0, 0, 1, 1, 2, 2] * 60, dtype=float)
    y = (rng.random(z.size) < expit(-1.5 + z * (-1.0 + 1.5 * dose))).astype(float)
    out = dose_response(y, z, dose, cluster=np.repeat(np.arange(60), 6), n_boot=20, seed=0)
    b0, b1, _ = _glm(y, z, dose)
    m_bar = y[z == 1].mean() - y[z == 0].mean()
    lam = 1 - (expit(b0 + b1) - expit(b0)) / m_bar
    assert out["identified"] is True and lam > 1.2
    assert out["leakage_share"]["estimate"] == pytest.approx(lam, abs=1e-4)
    assert out["leakage_share"]["headline"] == 1.0


def test_a_negative_dose_is_refused_with_its_message():
    with pytest.raises(ValueError) as err:
        dose_response([1, 0], [1, 0], [0.5, -1e-9], cluster=["a", "b"])
    assert str(err.value) == "dose_response: dose must be a non-negative magnitude"
