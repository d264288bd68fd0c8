"""Binomial intervals: Wilson (rates in tables) and the one-sided exact bound for zero errors.

Why here: several suites report proportions (faithful rate, parse rate, report rate). They all
take their interval from this one place so a reader checks one implementation. Both intervals are
statsmodels' (``proportion_confint``); this module only fixes the conventions: n = 0 gives the
uninformative (0, 1), and the error-rate bound is one-sided, because "k errors in n trials"
is a claim about how large the true rate can be, not how small.
"""

from __future__ import annotations


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (95% by default).

    Honest at 0/n and n/n, unlike the normal approximation. ``z`` is converted to the two-sided
    alpha statsmodels expects; n = 0 returns (0, 1).
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    from scipy.stats import norm
    from statsmodels.stats.proportion import proportion_confint

    alpha = 2.0 * float(norm.sf(z))
    lo, hi = proportion_confint(k, n, alpha=alpha, method="wilson")
    # exact ends at 0/n and n/n (floating point leaves 1e-17 there)
    return (0.0 if k == 0 else max(0.0, float(lo)), 1.0 if k == n else min(1.0, float(hi)))


def error_rate_upper_bound(errors: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on a true error rate after ``errors`` in ``n`` trials.

    At errors = 0 this is 1 - (1 - confidence)^(1/n), about 3/n at 95% (the "rule of three"):
    zero errors in 100 held-out pairs bound the rate below ~3%, they do not show it is zero.
    """
    if n <= 0:
        return 1.0
    if errors < 0 or errors > n:
        raise ValueError(f"error_rate_upper_bound: need 0 <= errors <= n, got {errors}, {n}")
    if errors == n:
        return 1.0
    from statsmodels.stats.proportion import proportion_confint

    # a two-sided interval at alpha = 2 (1 - confidence) has the one-sided bound as its upper end
    _, hi = proportion_confint(errors, n, alpha=2.0 * (1.0 - confidence), method="beta")
    return float(hi)


def rule_of_three(n: int) -> float:
    """The textbook approximation 3/n to the 95% upper bound at zero errors (for comparison)."""
    return 3.0 / n if n > 0 else 1.0
