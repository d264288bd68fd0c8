"""Exact (or Monte Carlo) permutation test of paired AUROC = 0.5, items as the unit (C.3 / D.3).

Why: a clustered bootstrap over few items is degenerate (a perfect detector over 9 items has SE 0,
and a normal approximation on a bootstrap SE from 9 items gives q = 9.2e-27). A permutation test
over the exchangeable units has none of these failures: under the null that intervention and sham
are exchangeable within each pair, swapping the two labels of every pair of an item together leaves
the joint law unchanged, so the item-level sign flips are the permutation group.

The statistic is the AUROC itself. With pooled midranks r(.) of all 2n scores (ties half, as
``sdt.auroc``), the Mann-Whitney identity gives

    AUROC - 1/2 = sum_j (r(g_int,j) - r(g_sham,j)) / (2 n^2),

and swapping the labels of pair j only negates its rank difference (the pooled ranks do not move).
So the AUROC under any within-item relabelling is a sign flip of the per-item sums of rank
differences: ``scipy.stats.permutation_test`` with ``permutation_type='samples'`` on those sums is
an exact test of the AUROC (every one of the 2^C flips when that is at most ``n_resamples``, else a
Monte Carlo test whose p-value is never below 1 / (n_resamples + 1) per side).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# 2^16 flips: exact up to 16 items; beyond, Monte Carlo with p >= 2 / 65,536 two-sided
N_RESAMPLES = 65_535


def item_rank_sums(g_int: Sequence[float], g_sham: Sequence[float], clusters: Sequence[object]) -> np.ndarray:
    """Per-item sums of pooled midrank differences r(g_int) - r(g_sham) (the module text)."""
    from scipy.stats import rankdata

    gi, gs = np.asarray(g_int, dtype=float), np.asarray(g_sham, dtype=float)
    r = rankdata(np.concatenate([gi, gs]))
    d = r[: gi.size] - r[gi.size:]
    _, codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    return np.bincount(codes, weights=d)


def item_signflip_test(g_int: Sequence[float], g_sham: Sequence[float], clusters: Sequence[object], *,
                       n_resamples: int = N_RESAMPLES, seed: int = 0) -> dict:
    """Two-sided permutation p-value of AUROC = 0.5 with item-level label swaps.

    Returns ``p_value``, ``exact`` (all 2^C flips enumerated), ``items`` (C), ``flips`` (how many
    relabellings were used), ``auroc`` (the statistic, equal to ``sdt.auroc``) and ``test`` (its
    name). Zero pairs: ``p_value`` None. Every score identical: every flip gives AUROC 1/2, so p = 1
    (an exact statement, not a zero-SE artefact; the verdict names that reporter constant).
    """
    from scipy.stats import permutation_test

    n = len(g_int)
    name = "paired sign-flip permutation over item clusters (AUROC; within-pair label swaps, two-sided)"
    if n == 0:
        return {"test": name, "p_value": None, "exact": None, "items": 0, "flips": 0, "auroc": None}
    sums = item_rank_sums(g_int, g_sham, clusters)
    c = sums.size
    exact = 2 ** c <= n_resamples
    auc = 0.5 + float(sums.sum()) / (2.0 * n * n)
    if not np.any(sums) or c == 1:  # every flip as extreme as the data: no rank difference, or one item (2 flips)
        return {"test": name, "p_value": 1.0, "exact": True, "items": int(c), "flips": 2 ** c if exact else None,
                "auroc": auc}
    res = permutation_test((sums,), lambda x, axis: np.sum(x, axis=axis), permutation_type="samples",
                           vectorized=True, n_resamples=n_resamples, alternative="two-sided",
                           rng=np.random.default_rng(seed))
    return {"test": name, "p_value": float(min(1.0, res.pvalue)), "exact": bool(exact), "items": int(c),
            "flips": int(2 ** c if exact else n_resamples), "auroc": auc}
