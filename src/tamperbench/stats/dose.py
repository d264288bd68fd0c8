"""Hierarchical dose-response model, zero-dose margin m0 and leakage share lambda (Eq. 3, 10, 11).

    logit P(y_u = 1) = b0 + b1 z_u + z_u g(delta_u) + sum_f b_f[level_f(u)],   b_f ~ N(0, sigma_f^2)

z = 1 intervention / 0 sham, delta the experimenter-set perturbation magnitude (>= 0; for a scale
operator the caller passes |strength - 1|), g monotone non-decreasing, g(0) = 0, piecewise linear
through the distinct positive doses t_1 < ... < t_K: a non-negative combination of
h_2(delta) = min(delta, t_2) / (t_2 - t_1) and ramps h_k = clip((delta - t_{k-1}) / (t_k - t_{k-1}), 0, 1),
k >= 3. The one assumption that makes m0 identified: below the lowest dose g continues the slope of
the first observed segment (linear extrapolation to zero dose); a free value at t_1 would be
collinear with b1. A ladder with a single positive dose cannot extrapolate and is declared not
identified. Dose enters only with z: a sham has no dose.

Why own code: statsmodels' GLMMs (``BinomialBayesMixedGLM``) fit crossed Gaussian random
intercepts but cannot bound coefficients, and the monotone term needs gamma_k >= 0. So:
(1) the random-effect standard deviations come from statsmodels' variational-Bayes fit of the
unconstrained model; (2) holding them, the fixed part and the random intercepts are fitted by
penalised likelihood (MAP) with L-BFGS-B and gamma >= 0; (3) m0 integrates the random effects
over their fitted distribution (Gauss-Hermite, Eq. 11), not evaluated at b = 0.

lambda = 1 - m0 / m_bar with m_bar the aggregate report-rate margin. The model *declares itself
not identified* when m_bar's interval includes zero (Section 7.4: a ratio whose denominator is
compatible with zero is governed by noise) and returns no lambda. m0 is the access-relevant
estimand only in the used-object stratum; rows without that classification are flagged
``stratified: False`` ("a number, but not the estimand").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import optimize, sparse
from scipy.special import expit

from tamperbench.stats.bootstrap import cluster_weight_chunks, cluster_codes, percentile_interval


def ramp_basis(dose: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """Columns h_2..h_K for doses t_1 < ... < t_K (K >= 2); each non-decreasing, zero at dose 0."""
    cols = [np.minimum(dose, knots[1]) / (knots[1] - knots[0])]
    for k in range(2, knots.size):
        cols.append(np.clip((dose - knots[k - 1]) / (knots[k] - knots[k - 1]), 0.0, 1.0))
    return np.column_stack(cols)


def _design(z, dose, knots, groups):
    dense = np.column_stack([np.ones_like(z), z, z[:, None] * ramp_basis(dose, knots)])
    blocks, sizes = [], []
    for codes in groups:
        L = int(codes.max()) + 1
        blocks.append(sparse.csr_matrix((np.ones(codes.size), (np.arange(codes.size), codes)), shape=(codes.size, L)))
        sizes.append(L)
    X = sparse.hstack([sparse.csr_matrix(dense), *blocks]).tocsr() if blocks else sparse.csr_matrix(dense)
    return X, dense.shape[1], sizes


def fit_map(y, z, dose, knots, groups: Sequence[np.ndarray], sigmas: Sequence[float], weights=None,
            start=None) -> np.ndarray:
    """Penalised-likelihood fit; returns [b0, b1, gamma_1..gamma_K, random intercepts...]."""
    X, n_fixed, sizes = _design(z, dose, knots, groups)
    w = np.ones_like(y) if weights is None else weights
    prec = np.concatenate([np.full(L, 1.0 / max(s, 1e-3) ** 2) for L, s in zip(sizes, sigmas)]) if sizes else np.zeros(0)

    def f(theta):
        eta = X @ theta
        nll = float((w * (np.logaddexp(0.0, eta) - y * eta)).sum())
        r = theta[n_fixed:]
        grad = X.T @ (w * (expit(eta) - y))
        grad[n_fixed:] += prec * r
        return nll + 0.5 * float((prec * r * r).sum()), grad

    bounds = [(None, None)] * 2 + [(0.0, None)] * (n_fixed - 2) + [(None, None)] * int(sum(sizes))
    res = optimize.minimize(f, np.zeros(X.shape[1]) if start is None else start, jac=True, method="L-BFGS-B", bounds=bounds,
                            options={"maxiter": 2000})
    return res.x


def zero_dose_margin(b0: float, b1: float, sigma_total: float, n_nodes: int = 40) -> float:
    """Eq. 11: E_b[expit(b0 + b1 + b) - expit(b0 + b)], b ~ N(0, sigma_total^2), Gauss-Hermite."""
    x, wts = np.polynomial.hermite_e.hermegauss(n_nodes)
    b = sigma_total * x
    return float((wts * (expit(b0 + b1 + b) - expit(b0 + b))).sum() / wts.sum())


def _vb_sigmas(y, z, basis, groups: dict[str, np.ndarray], seed: int) -> list[float]:
    """The random effects' SDs from statsmodels' variational Bayes fit. ``seed`` draws its starting values:
    without one, ``fit_vb`` draws them from fresh OS entropy, and the same data gave another fit each run
    (owmi score's dose-ladder beta0 20.18 in one run, 21.05 in the next)."""
    if not groups:
        return []
    import pandas as pd
    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM

    df = pd.DataFrame({"y": y, "z": z, **{f"h{k}": z * basis[:, k] for k in range(basis.shape[1])},
                       **{f"g_{k}": v for k, v in groups.items()}})
    terms = " + ".join(["z"] + [f"h{k}" for k in range(basis.shape[1])])
    vc = {k: f"0 + C(g_{k})" for k in groups}
    try:
        fit = BinomialBayesMixedGLM.from_formula(f"y ~ {terms}", vc, df).fit_vb(rng=np.random.default_rng(seed))
        return [float(s) for s in np.exp(fit.vcp_mean)]
    except Exception:  # noqa: BLE001 - a failed VB fit falls back to a unit prior SD, reported
        return [1.0] * len(groups)


def _refit(y, z, dose, knots, gcodes, sigmas, sig_tot, start, w) -> tuple[float, float]:
    """One bootstrap replicate (w = cluster multiplicities per row): (m0, m_bar)."""
    th = fit_map(y, z, dose, knots, list(gcodes.values()), sigmas, weights=w, start=start)
    wi, ws = w * (z == 1), w * (z == 0)
    mb = (wi @ y) / wi.sum() - (ws @ y) / ws.sum() if wi.sum() and ws.sum() else np.nan
    return zero_dose_margin(th[0], th[1], sig_tot), mb


def dose_response(y, z, dose, *, groups: dict[str, Sequence[object]] | None = None, cluster: Sequence[object],
                  used: Sequence[bool] | None = None, n_boot: int = 200, seed: int = 0, level: float = 0.95) -> dict:
    """Fit Eq. 10 and report m0 (interval), m_bar (interval), lambda or the reason it is not identified.

    ``cluster`` (the item of each row) is the bootstrap unit; ``used`` marks rows in the used-object
    stratum (None: no causal-relevance classification exists, result flagged unstratified).
    """
    y = np.asarray(y, dtype=float)
    z = np.asarray(z, dtype=float)
    dose = np.asarray(dose, dtype=float)
    if np.any(dose < 0):
        raise ValueError("dose_response: dose must be a non-negative magnitude")
    stratified = used is not None
    if stratified:
        keep = np.asarray(used, dtype=bool)
        y, z, dose = y[keep], z[keep], dose[keep]
        cluster = [c for c, k in zip(cluster, keep) if k]
        groups = {k: [v for v, kk in zip(vals, keep) if kk] for k, vals in (groups or {}).items()}
    if y.size == 0 or len(set(z)) < 2:
        return {"identified": False, "reason": "no intervention and sham rows to contrast", "stratified": stratified}
    knots = np.unique(dose[(z == 1) & (dose > 0)])
    if knots.size < 2:
        return {"identified": False, "stratified": stratified, "m0": None, "leakage_share": None,
                "reason": f"{knots.size} positive dose level(s): at least two are needed to extrapolate to zero dose"}
    gcodes = {k: np.unique(np.asarray(v).astype(str), return_inverse=True)[1] for k, v in (groups or {}).items()}
    sigmas = _vb_sigmas(y, z, ramp_basis(dose, knots), gcodes, seed)
    sig_tot = float(np.sqrt(sum(s * s for s in sigmas)))
    theta = fit_map(y, z, dose, knots, list(gcodes.values()), sigmas)
    m0 = zero_dose_margin(theta[0], theta[1], sig_tot)
    m_bar = float(y[z == 1].mean() - y[z == 0].mean())
    codes, n_cl = cluster_codes(cluster)
    m0_reps, mb_reps = [], []
    from threadpoolctl import threadpool_limits

    # many tiny L-BFGS-B refits: a multi-threaded BLAS only oversubscribes the cores (30 s -> 2 s measured)
    with threadpool_limits(1):
        reps = [_refit(y, z, dose, knots, gcodes, sigmas, sig_tot, theta, w[0])
                for w in cluster_weight_chunks(codes, n_cl, n_boot, seed, chunk=1)]
    m0_reps = [r[0] for r in reps]
    mb_reps = [r[1] for r in reps]
    m0_ci = percentile_interval(np.asarray(m0_reps), level)
    mb_ci = percentile_interval(np.asarray(mb_reps), level)
    out = {"stratified": stratified, "n": int(y.size), "knots": knots.tolist(), "sigmas": dict(zip(gcodes, sigmas)),
           "beta0": float(theta[0]), "beta1": float(theta[1]), "gamma": theta[2:1 + knots.size].tolist(),
           "m0": {"estimate": m0, "ci": m0_ci}, "m_bar": {"estimate": m_bar, "ci": mb_ci}}
    if not (mb_ci[0] > 0 or mb_ci[1] < 0):
        out.update(identified=False, leakage_share=None,
                   reason=f"aggregate margin interval [{mb_ci[0]:.4f}, {mb_ci[1]:.4f}] includes zero: lambda = 1 - m0/m_bar is not identified")
        return out
    lam = 1.0 - m0 / m_bar
    lam_reps = 1.0 - np.asarray(m0_reps) / np.asarray(mb_reps)
    out.update(identified=True, reason="",
               leakage_share={"estimate": lam, "ci": percentile_interval(lam_reps, level),
                              "headline": float(min(1.0, max(0.0, lam)))})
    return out


def extraction_ratio(m_bar: float, m_bar_ci: tuple[float, float], m_probe: float) -> dict:
    """rho = m_bar / m_probe (Eq. 15): raw estimate and interval; only the headline is truncated to [0, 1].

    Undefined (None) when the probe margin is not above zero: nothing was linearly available, the
    site drops out of the primary analysis.
    """
    if not (m_probe > 0):
        return {"rho": None, "reason": "probe margin <= 0: nothing linearly available; site excluded"}
    rho = m_bar / m_probe
    return {"rho": rho, "ci": (m_bar_ci[0] / m_probe, m_bar_ci[1] / m_probe),
            "headline": min(1.0, max(0.0, rho)), "reason": ""}
