"""The linear-probe anchor's statistics (OWMI Appendix C.8): the item split, one read-out layer's
held-out accuracy with its label-shuffled permutation null, and the line that describes it.

Why apart from ``probe.py``: that module drives the model (activation capture under hooks); this one
turns features into the published numbers, takes no model, and is what ``make mutate`` measures
(``[tool.mutmut] only_mutate``). The pass rule and the source's mis-specified rule are explained in
``probe.py``'s docstring.
"""

from __future__ import annotations

import numpy as np


def split_items(n_items: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n_items)
    n_test = max(1, int(round(n_items * test_fraction)))
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def fit_layer(x_sham: np.ndarray, x_int: np.ndarray, train: np.ndarray, test: np.ndarray, *, n_perm: int,
              quantile: float, seed: int) -> dict:
    """Held-out accuracy of a logistic probe and its label-shuffled null for one read-out layer."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    xtr = np.concatenate([x_sham[train], x_int[train]])
    ytr = np.r_[np.zeros(train.size), np.ones(train.size)]
    xte = np.concatenate([x_sham[test], x_int[test]])
    yte = np.r_[np.zeros(test.size), np.ones(test.size)]

    def fit(labels):
        clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        clf.fit(xtr, labels)
        return float((clf.predict(xte) == yte).mean())

    acc = fit(ytr)
    rng = np.random.default_rng(seed)
    null = np.array([fit(rng.permutation(ytr)) for _ in range(n_perm)]) - 0.5
    margin = acc - 0.5
    out = {"n_train": int(ytr.size), "n_test": int(yte.size), "accuracy": acc, "margin": margin,
           "errors": int(round((1 - acc) * yte.size)), "n_perm": int(n_perm)}
    if n_perm:
        q = float(np.quantile(null, quantile))
        out.update(null_mean=float(null.mean()), null_sd=float(null.std(ddof=1)) if n_perm > 1 else 0.0,
                   null_band=(float(np.quantile(null, 0.025)), float(np.quantile(null, 0.975))),
                   null_quantile=q, passes=bool(margin > q),
                   p_value=float((1 + np.sum(null >= margin)) / (1 + n_perm)),
                   null_max_abs=float(np.abs(null).max()), source_rule_pass=bool(np.abs(null).max() < 0.1))
    else:
        out.update(passes=None, null_quantile=None, source_rule_pass=None)
    return out


def describe_layer(row: dict) -> str:
    """'0.958 (margin 0.458; null 95% band [-0.125, 0.125]; passes)' or 'no held-out error in 48'."""
    acc = f"no held-out error in {row['n_test']}" if row["errors"] == 0 else f"accuracy {row['accuracy']:.3f}"
    if row.get("null_band") is None:
        return f"{acc}; margin {row['margin']:+.3f}; no permutation null"
    lo, hi = row["null_band"]
    verdict = "passes" if row["passes"] else "does not pass"
    return (f"{acc}; margin {row['margin']:+.3f}; null central 95% [{lo:+.3f}, {hi:+.3f}], "
            f"95th pct {row['null_quantile']:+.3f} -> {verdict}")
