"""Verbalised-confidence scoring (OWMI Appendix C.7): Brier score, equal-mass ECE, selective AUROC.

* Brier score: scikit-learn's ``brier_score_loss``.
* ECE over J equal-mass bins: own code, because scikit-learn's ``calibration_curve`` drops the
  bin sizes it would need for the n_j/n weights and silently merges tied quantile edges. Bins here
  are consecutive runs of the confidence-sorted sample, sizes differing by at most one (ties are
  broken by a stable sort, so the binning is deterministic); ECE = sum_j n_j/n |acc(j) - conf(j)|.
* Selective-prediction AUROC: AUROC of the confidence for the model's own introspective
  correctness (does higher confidence go with being right?), tied-score convention, 0.5 when the
  confidence is constant, NaN when every answer is right (or every one wrong).
"""

from __future__ import annotations

import numpy as np

from tamperbench.stats.sdt import auroc


def _check(p, y):
    p = np.asarray(p, dtype=float)
    y = np.asarray(y, dtype=float)
    if p.shape != y.shape:
        raise ValueError("confidence and outcome arrays differ in length")
    if p.size and (np.nanmin(p) < 0 or np.nanmax(p) > 1):
        raise ValueError("confidence must lie in [0, 1]")
    return p, y


def brier(p, y) -> float:
    p, y = _check(p, y)
    if p.size == 0:
        return float("nan")
    from sklearn.metrics import brier_score_loss

    return float(brier_score_loss(y.astype(int), p, pos_label=1)) if len(set(y)) > 1 else float(np.mean((p - y) ** 2))


def ece_equal_mass(p, y, n_bins: int = 10) -> float:
    p, y = _check(p, y)
    n = p.size
    if n == 0:
        return float("nan")
    order = np.argsort(p, kind="stable")
    total = 0.0
    for part in np.array_split(order, min(n_bins, n)):
        if part.size:
            total += part.size / n * abs(y[part].mean() - p[part].mean())
    return float(total)


def selective_auroc(confidence, correct) -> float:
    c, k = _check(confidence, correct)
    return auroc(c[k == 1], c[k == 0])
