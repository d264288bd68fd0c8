"""Signal-detection summaries of intervention-vs-sham reports (OWMI Eq. 2, Appendix C.3).

* :func:`dprime` - finite, edge-corrected d' = Phi^-1(H) - Phi^-1(F). Rates of 0 or 1 are
  replaced by 1/(2N) and 1 - 1/(2N) before the probit (N = trials behind that rate), so a
  perfect detector gets a large finite value (100/100 hits, 0/100 false alarms -> 5.1517, the
  source's figure) instead of infinity, and a model answering "yes" on every run gets exactly 0.
* :func:`auroc` - tied-score AUROC = P(g_int > g_sham) + 1/2 P(g_int = g_sham) over all
  intervention x sham combinations (the Mann-Whitney statistic). It equals scikit-learn's
  ``roc_auc_score`` where that is defined; we keep our own because scikit-learn raises on a single
  class and we need the *weighted* form (:func:`weighted_auroc`) that the vectorised clustered
  bootstrap evaluates for thousands of weight vectors at once, which no library offers.

A constant report (every score equal) gets AUROC 0.5 and d' 0, whatever the constant.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm


def corrected_rate(k, n):
    """k/n with 0 -> 1/(2n) and 1 -> 1 - 1/(2n); works elementwise on arrays (n > 0)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    rate = np.divide(k, n, out=np.full(np.broadcast(k, n).shape, np.nan), where=n > 0)
    half = np.divide(0.5, n, out=np.full(rate.shape, np.nan), where=n > 0)
    rate = np.where(rate <= 0.0, half, rate)
    return np.where(rate >= 1.0, 1.0 - half, rate)


def dprime_counts(hits, n_int, false_alarms, n_sham):
    """d' from counts (elementwise): probit of the corrected hit rate minus that of the false alarms."""
    h = corrected_rate(hits, n_int)
    f = corrected_rate(false_alarms, n_sham)
    out = norm.ppf(h) - norm.ppf(f)
    return float(out) if np.ndim(out) == 0 else out


def dprime(y_int, y_sham) -> float:
    """d' of binary reports (1 = "change detected") on intervention and sham runs; NaN if either is empty."""
    yi = np.asarray(y_int, dtype=float)
    ys = np.asarray(y_sham, dtype=float)
    if yi.size == 0 or ys.size == 0:
        return float("nan")
    return dprime_counts(yi.sum(), yi.size, ys.sum(), ys.size)


def weighted_auroc(g_int, g_sham, w_int, w_sham) -> np.ndarray:
    """Tied AUROC for many weight vectors at once.

    ``g_int`` (n_i,), ``g_sham`` (n_s,) are fixed scores; ``w_int`` (B, n_i) and ``w_sham`` (B, n_s)
    are per-replicate multiplicities (a bootstrap replicate only changes how often each observation
    counts, never the scores). The sham scores are sorted once; for every intervention score the
    positions of the sham scores below and equal to it are found once with ``searchsorted``; each
    replicate is then a cumulative sum and two gathers, so B replicates cost O(B (n_i + n_s)).
    """
    g_int = np.asarray(g_int, dtype=float)
    g_sham = np.asarray(g_sham, dtype=float)
    w_int = np.atleast_2d(np.asarray(w_int, dtype=float))
    w_sham = np.atleast_2d(np.asarray(w_sham, dtype=float))
    order = np.argsort(g_sham, kind="stable")
    sorted_sham = g_sham[order]
    lo = np.searchsorted(sorted_sham, g_int, side="left")
    hi = np.searchsorted(sorted_sham, g_int, side="right")
    cum = np.zeros((w_sham.shape[0], w_sham.shape[1] + 1))
    np.cumsum(w_sham[:, order], axis=1, out=cum[:, 1:])
    below = cum[:, lo]
    equal = cum[:, hi] - below
    num = (w_int * (below + 0.5 * equal)).sum(axis=1)
    den = w_int.sum(axis=1) * w_sham.sum(axis=1)
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


def level_auroc(h_int: np.ndarray, h_sham: np.ndarray) -> np.ndarray:
    """Tied AUROC from score histograms: ``h_*`` (B, K) weighted counts over K sorted score levels.

    AUROC = sum_k h_int[k] (sham mass below level k + 1/2 sham mass at k) / (total_int total_sham).
    """
    cum = np.cumsum(h_sham, axis=1)
    num = (h_int * (cum - 0.5 * h_sham)).sum(axis=1)
    den = h_int.sum(axis=1) * h_sham.sum(axis=1)
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


def auroc(g_int, g_sham) -> float:
    """Tied-score AUROC of intervention scores against sham scores; NaN if either is empty."""
    g_int = np.asarray(g_int, dtype=float)
    g_sham = np.asarray(g_sham, dtype=float)
    if g_int.size == 0 or g_sham.size == 0:
        return float("nan")
    return float(weighted_auroc(g_int, g_sham, np.ones((1, g_int.size)), np.ones((1, g_sham.size)))[0])
