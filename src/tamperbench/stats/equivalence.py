"""Equivalence bound: the two one-sided tests (TOST) inverted to the tightest margin (Section 3.5).

For an estimate theta (here AUROC) with standard error SE (from the clustered bootstrap) and a
null value theta0 = 0.5, the TOST at margin delta rejects both H0+: theta >= theta0 + delta and
H0-: theta <= theta0 - delta at level alpha exactly when delta > |theta - theta0| + z_{1-alpha} SE.
Inverting gives the smallest margin the data support, so the reader sees how tightly the effect is
bounded instead of whether it clears a margin we chose.

Paper-exact beside ours: the source writes ``theta - 0.5 + z SE`` (no absolute value), which
understates the bound when the estimate falls below chance; :func:`equivalence_bound` uses
|theta - theta0| and also returns the source's form as ``source_bound``. The z-test form has no
library equivalent taking an external SE (statsmodels' ``ztost`` takes raw data); the tests check
it against ``ztost`` on data whose SE is the textbook one.
"""

from __future__ import annotations

from collections.abc import Sequence

from scipy.stats import norm


def tost_pvalue(theta: float, se: float, delta: float, theta0: float = 0.5) -> float:
    """Larger of the two one-sided p-values for equivalence within theta0 +/- delta (z-test)."""
    if se <= 0:
        return 0.0 if abs(theta - theta0) < delta else 1.0
    p_upper = norm.cdf((theta - (theta0 + delta)) / se)  # H0+: theta >= theta0 + delta
    p_lower = norm.sf((theta - (theta0 - delta)) / se)  # H0-: theta <= theta0 - delta
    return float(max(p_upper, p_lower))


def equivalence_bound(theta: float, se: float, alphas: Sequence[float] = (0.05, 0.01, 0.0001),
                      theta0: float = 0.5) -> list[dict]:
    """For each alpha, the tightest margin delta the data support (and the source's signed form).

    With SE = 0 (a degenerate bootstrap, e.g. every report identical) the bound collapses to the
    point |theta - theta0|; the caller should read that beside the error-rate bound, not as proof.
    """
    out = []
    for a in alphas:
        z = float(norm.ppf(1.0 - a))
        out.append({"alpha": float(a), "z": z, "bound": abs(theta - theta0) + z * se,
                    "source_bound": theta - theta0 + z * se})
    return out
