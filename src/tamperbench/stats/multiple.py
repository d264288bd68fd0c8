"""Benjamini-Hochberg false-discovery control across cells (Appendix D), via statsmodels.

NaN p-values (a cell with no scorable pair) are kept out of the family and come back as NaN,
so an empty cell neither counts as a test nor dilutes the others.
"""

from __future__ import annotations

import numpy as np


def benjamini_hochberg(pvalues, alpha: float = 0.05) -> dict:
    p = np.asarray(pvalues, dtype=float)
    reject = np.zeros(p.shape, dtype=bool)
    adjusted = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        from statsmodels.stats.multitest import multipletests

        r, q, _, _ = multipletests(p[ok], alpha=alpha, method="fdr_bh")
        reject[ok], adjusted[ok] = r, q
    return {"reject": reject.tolist(), "q": adjusted.tolist(), "alpha": alpha, "m": int(ok.sum())}
