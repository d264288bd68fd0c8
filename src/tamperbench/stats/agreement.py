"""Inter-rater agreement: Cohen's kappa (two raters) and Fleiss' kappa (any number of raters).

Cohen's kappa delegates to :func:`sklearn.metrics.cohen_kappa_score`, Fleiss' kappa to statsmodels'
:func:`statsmodels.stats.inter_rater.fleiss_kappa` (``method="fleiss"``, Fleiss 1971); this module
checks the table and decides where kappa is undefined. The tests check it against the worked example
in that paper's literature (Wikipedia's 10-subject, 14-rater table, kappa = 0.210) and against Cohen's
kappa limits.

Both return ``None`` where kappa is undefined (no items, or chance agreement is exactly 1, i.e.
every rating is the same category, where the formula is 0/0). Callers print "n/a" and report the
raw agreement beside it instead of inventing a number.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np


def cohen_kappa(a: Sequence[object], b: Sequence[object]) -> float | None:
    """Cohen's kappa of two equally long rating sequences; ``None`` when undefined."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: sequences differ in length ({len(a)} vs {len(b)})")
    if not a:
        return None
    categories = sorted(set(a) | set(b), key=repr)
    if len(categories) == 1:
        return None  # both raters used one category for everything: p_e = 1, kappa is 0/0
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = float(cohen_kappa_score(list(a), list(b), labels=categories))
    return None if np.isnan(value) else value


def fleiss_kappa(counts: np.ndarray | Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa from an items x categories table of rating counts.

    Every row must sum to the same number of raters n >= 2 (Fleiss' kappa assumes a fixed number
    of ratings per item; items a rater abstained on must be dropped by the caller).

        p_j   = sum_i n_ij / (N n)                      share of all ratings in category j
        P_i   = (sum_j n_ij^2 - n) / (n (n - 1))        agreement on item i
        P_bar = mean_i P_i ;  P_e = sum_j p_j^2
        kappa = (P_bar - P_e) / (1 - P_e)
    """
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2:
        raise ValueError("fleiss_kappa: counts must be a 2-D items x categories table")
    if table.shape[0] == 0:
        return None
    if np.any(table < 0):
        raise ValueError("fleiss_kappa: counts must be non-negative")
    raters = table.sum(axis=1)
    n = raters[0]
    if not np.all(raters == n):
        raise ValueError("fleiss_kappa: every item needs the same number of ratings")
    if n < 2:
        raise ValueError("fleiss_kappa: needs at least two ratings per item")
    p_j = table.sum(axis=0) / (table.shape[0] * n)
    if np.isclose(float(np.square(p_j).sum()), 1.0):
        return None  # every rating in one category: P_e = 1, kappa is 0/0
    from statsmodels.stats.inter_rater import fleiss_kappa as _fleiss

    return float(_fleiss(table, method="fleiss"))


def fleiss_kappa_from_ratings(ratings: Sequence[Sequence[object]]) -> float | None:
    """Fleiss' kappa from per-item rating lists (one entry per rater), e.g. ``[[True, True, False], ...]``."""
    if not ratings:
        return None
    categories = sorted({r for row in ratings for r in row}, key=repr)
    index = {c: j for j, c in enumerate(categories)}
    table = np.zeros((len(ratings), max(len(categories), 2)), dtype=float)
    for i, row in enumerate(ratings):
        for r in row:
            table[i, index[r]] += 1
    return fleiss_kappa(table)


def percent_agreement(a: Sequence[object], b: Sequence[object]) -> float | None:
    """Share of items on which two raters agree; ``None`` for no items."""
    if len(a) != len(b):
        raise ValueError("percent_agreement: sequences differ in length")
    if not a:
        return None
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
