"""Crossed variance components and ICCs (OWMI Appendix C.6, Eq. 12-13; D.2 contrasts, Eq. 18).

Model: s_u = mu + b_domain + b_object + b_item + b_seed + e_u, all effects independent Gaussian.

Why a moment estimator and not statsmodels: ``MixedLM`` fits crossed factors only as variance
components of a single group, i.e. with one dense n x n covariance; on this machine it took 46 s
for 1,545 rows with these four factors (measured 2026-11-30), and campaign cells hold tens of
thousands of rows, inside a bootstrap. Instead we use the pairwise-difference (U-statistic)
moment method of Gao & Owen (2017, "Efficient moment calculations for variance components in
large unbalanced crossed random effects models"): for u != v,

    E[(s_u - s_v)^2] = 2 sigma_e^2 + 2 sum_g sigma_g^2 [u, v differ in factor g].

Summing over all pairs and over the pairs sharing a level of each factor gives K + 1 linear
equations in the K + 1 variances, each sum computable in O(n) from within-level totals. The
estimates are unbiased, may be negative (reported raw; ICCs use them truncated at zero), and agree
with MixedLM's REML on small balanced designs (tested). Intervals resample items with replacement,
each drawn copy a new item, as a documented approximation for crossed designs: they carry item-level
uncertainty only, so with few domains or objects the intervals of those ICCs are too narrow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def _pairs_same(*codes: np.ndarray) -> float:
    """Number of unordered pairs sharing the level of every factor given (codes are 0..L-1)."""
    key = np.zeros(codes[0].size, dtype=np.int64)
    for c in codes:
        key = key * (int(c.max()) + 1) + c
    counts = np.bincount(np.unique(key, return_inverse=True)[1]).astype(float)
    return float((counts * (counts - 1) / 2).sum())


def _u_stat(y: np.ndarray, codes: np.ndarray | None) -> float:
    """Sum over unordered pairs in the same level of (y_u - y_v)^2 = sum_l (n_l S2_l - S1_l^2)."""
    if codes is None:
        return float(y.size * (y ** 2).sum() - y.sum() ** 2)
    n_l = np.bincount(codes)
    s1 = np.bincount(codes, weights=y)
    s2 = np.bincount(codes, weights=y * y)
    return float((n_l * s2 - s1 ** 2).sum())


def variance_components(y_in: Sequence[float] | np.ndarray, factors: Mapping[str, Any]) -> dict:
    """Moment estimates of each factor's variance and the residual's; ``{"sigma2": {...}, "n": n}``."""
    y = np.asarray(y_in, dtype=float)
    names = list(factors)
    codes = {k: np.unique(np.asarray(factors[k]).astype(str), return_inverse=True)[1] for k in names}
    n = y.size
    if n < 2:
        return {"n": n, "sigma2": {**{k: float("nan") for k in names}, "residual": float("nan")}}
    n_all = n * (n - 1) / 2
    same = {k: _pairs_same(codes[k]) for k in names}
    rows, rhs = [], []
    for s in [None, *names]:
        n_s = n_all if s is None else same[s]
        row = []
        for g in names:
            both = same[g] if s is None else (same[s] if g == s else _pairs_same(codes[s], codes[g]))
            row.append(2.0 * (n_s - both))
        row.append(2.0 * n_s)
        rows.append(row)
        rhs.append(_u_stat(y, None if s is None else codes[s]))
    sol, *_ = np.linalg.lstsq(np.asarray(rows), np.asarray(rhs), rcond=None)
    return {"n": n, "sigma2": {**dict(zip(names, map(float, sol[:-1]))), "residual": float(sol[-1])}}


def iccs(sigma2: dict[str, float]) -> dict[str, float]:
    """ICC_f = sigma_f^2 / total, negative components truncated at zero first (Eq. 13)."""
    pos = {k: max(0.0, v) for k, v in sigma2.items()}
    tot = sum(pos.values())
    return {k: (v / tot if tot > 0 else float("nan")) for k, v in pos.items() if k != "residual"}


def icc_contrasts(y, factors: Mapping[str, Any], *, item: str = "item", seed_factor: str = "seed",
                  n_boot: int = 200, seed: int = 0, level: float = 0.95) -> dict:
    """ICCs, and Delta_f = ICC_f - ICC_seed for every other factor, with item-resampling intervals."""
    y = np.asarray(y, dtype=float)
    fac = {k: np.asarray([str(v) for v in vals]) for k, vals in factors.items()}
    point = variance_components(y, fac)
    icc = iccs(point["sigma2"])

    def contrasts(ic):
        return {k: ic[k] - ic[seed_factor] for k in ic if k != seed_factor} if seed_factor in ic else {}

    est = contrasts(icc)
    reps: dict[str, list[float]] = {k: [] for k in list(icc) + [f"delta_{k}" for k in est]}
    if item in fac and n_boot > 0 and y.size > 1:
        rng = np.random.default_rng(seed)
        levels, inv = np.unique(fac[item], return_inverse=True)
        members = [np.flatnonzero(inv == j) for j in range(levels.size)]
        for _ in range(n_boot):
            drawn = rng.integers(0, levels.size, levels.size)
            rows = np.concatenate([members[j] for j in drawn])
            copy = np.concatenate([np.full(members[j].size, c) for c, j in enumerate(drawn)])
            f2 = {k: (copy.astype(str) if k == item else v[rows]) for k, v in fac.items()}
            ic = iccs(variance_components(y[rows], f2)["sigma2"])
            for k, v in ic.items():
                reps[k].append(v)
            for k, v in contrasts(ic).items():
                reps[f"delta_{k}"].append(v)
    a = (1 - level) / 2

    def ci(v):
        v = np.asarray(v, dtype=float)
        v = v[np.isfinite(v)]
        return tuple(map(float, np.quantile(v, [a, 1 - a]))) if v.size else (float("nan"), float("nan"))

    return {"n": point["n"], "sigma2": point["sigma2"],
            "icc": {k: {"estimate": v, "ci": ci(reps[k])} for k, v in icc.items()},
            "delta": {k: {"estimate": v, "ci": ci(reps[f"delta_{k}"]),
                          "established": bool(ci(reps[f"delta_{k}"])[0] > 0)} for k, v in est.items()}}
