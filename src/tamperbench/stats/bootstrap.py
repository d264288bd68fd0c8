"""Item-pair clustered bootstrap, vectorised (OWMI Appendix C.3 / D.3).

Each replicate samples *clusters* (items) with replacement and carries every complete
intervention-sham pair of a drawn item together, so item difficulty cannot masquerade as
discrimination. Why own code: scipy.stats.bootstrap resamples observations, not clusters, and
calls the statistic once per replicate in Python; neither the d' nor the tied AUROC has a
library form that takes replicate weights.

How it is fast: a replicate only changes *how many times* each cluster counts. We draw an index
matrix (replicates x clusters) of cluster indices and turn it into a count matrix W with one
``bincount``. Every statistic is then a matrix product of W with per-cluster sufficient
statistics: hit and false-alarm counts for d' and the margin, and per-cluster histograms of the
scores over their sorted distinct levels (a sparse clusters x levels matrix) for the tied AUROC
(:func:`tamperbench.stats.sdt.level_auroc`: one cumulative sum per replicate). Replicates are
processed in chunks to bound memory.
:func:`detection_bootstrap_loop` is the plain per-replicate Python loop over the same draws, kept
as the reference the tests and ``benchmarks/stats_speed.py`` compare against.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from tamperbench.stats.sdt import dprime_counts, level_auroc, weighted_auroc


def cluster_codes(clusters: Sequence[object]) -> tuple[np.ndarray, int]:
    """Map arbitrary cluster labels to codes 0..C-1 (order of first appearance is irrelevant)."""
    _, codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    return codes.astype(np.int64), int(codes.max()) + 1 if len(codes) else 0


def cluster_weight_chunks(codes: np.ndarray, n_clusters: int, n_boot: int, seed: int,
                          chunk: int = 256, expand: bool = True) -> Iterator[np.ndarray]:
    """Yield (b, n_obs) multiplicity matrices, b <= chunk, n_boot rows in all.

    Row r is one bootstrap replicate: n_clusters cluster indices drawn uniformly with replacement
    (the index matrix), counted per cluster and (``expand``) spread to the observations of each
    cluster; ``expand=False`` yields the (b, n_clusters) cluster counts themselves.
    """
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_boot:
        b = min(chunk, n_boot - done)
        idx = rng.integers(0, n_clusters, size=(b, n_clusters))
        flat = idx + (np.arange(b)[:, None] * n_clusters)
        counts = np.bincount(flat.ravel(), minlength=b * n_clusters).reshape(b, n_clusters)
        yield counts[:, codes].astype(float) if expand else counts.astype(float)
        done += b


def _cluster_histogram(codes: np.ndarray, level_idx: np.ndarray, n_clusters: int, n_levels: int):
    """Sparse (clusters x levels) counts of observations per cluster at each score level."""
    from scipy import sparse

    return sparse.csr_matrix((np.ones(codes.size), (codes, level_idx)), shape=(n_clusters, n_levels))


class ClusterDetection:
    """Per-cluster sufficient statistics of paired detection data (pair sizes, hits, false alarms,
    and score histograms on the pooled levels), so one bootstrap replicate is a few products with a
    row of cluster weights instead of a resample of every pair. Shared by :func:`detection_bootstrap`
    and by contrasts that resample two sets of pairs with the same cluster weights (OWMI decay)."""

    def __init__(self, yi: np.ndarray, ys: np.ndarray, gi: np.ndarray, gs: np.ndarray, codes: np.ndarray,
                 n_clusters: int):
        self.size = np.bincount(codes, minlength=n_clusters).astype(float)
        self.hits = np.bincount(codes, weights=yi, minlength=n_clusters)
        self.fas = np.bincount(codes, weights=ys, minlength=n_clusters)
        levels = np.unique(np.concatenate([gi, gs]))
        self.hist_i = _cluster_histogram(codes, np.searchsorted(levels, gi), n_clusters, levels.size)
        self.hist_s = _cluster_histogram(codes, np.searchsorted(levels, gs), n_clusters, levels.size)

    def replicate(self, w: np.ndarray) -> dict[str, np.ndarray]:
        """d', AUROC and report-rate margin for a (replicates x clusters) matrix of cluster counts."""
        tot, hits, fas = w @ self.size, w @ self.hits, w @ self.fas
        return {"dprime": np.atleast_1d(dprime_counts(hits, tot, fas, tot)),
                "auroc": level_auroc((self.hist_i.T @ w.T).T, (self.hist_s.T @ w.T).T),
                "margin": (hits - fas) / tot}


def percentile_interval(reps: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return (float("nan"), float("nan"))
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(reps, [a, 1.0 - a])
    return (float(lo), float(hi))


def detection_bootstrap(y_int, y_sham, clusters, *, g_int=None, g_sham=None, n_boot: int = 2000,
                        seed: int = 0, level: float = 0.95, chunk: int = 256) -> dict:
    """Point estimates and clustered-bootstrap intervals of d', AUROC and the report-rate margin.

    Inputs are complete pairs: ``y_int[j]``, ``y_sham[j]`` binary reports of pair j, ``clusters[j]``
    its item; ``g_*`` optional graded scores for the AUROC (default: the binary reports).
    Returns ``{"n_pairs", "n_clusters", "dprime", "auroc", "margin"}`` with each statistic a dict
    of ``estimate``, ``ci`` (percentile), ``se`` (replicate standard deviation).
    """
    yi = np.asarray(y_int, dtype=float)
    ys = np.asarray(y_sham, dtype=float)
    gi = yi if g_int is None else np.asarray(g_int, dtype=float)
    gs = ys if g_sham is None else np.asarray(g_sham, dtype=float)
    n = yi.size
    if not (ys.size == n == gi.size == gs.size == len(clusters)):
        raise ValueError("detection_bootstrap: paired inputs must have equal lengths")
    nan = {"estimate": float("nan"), "ci": (float("nan"), float("nan")), "se": float("nan")}
    if n == 0:
        return {"n_pairs": 0, "n_clusters": 0, "dprime": dict(nan), "auroc": dict(nan), "margin": dict(nan)}
    codes, n_clusters = cluster_codes(clusters)
    point = {
        "dprime": float(dprime_counts(yi.sum(), n, ys.sum(), n)),
        "auroc": float(weighted_auroc(gi, gs, np.ones((1, n)), np.ones((1, n)))[0]),
        "margin": float(yi.mean() - ys.mean()),
    }
    stats = ClusterDetection(yi, ys, gi, gs, codes, n_clusters)
    reps: dict[str, list[np.ndarray]] = {k: [] for k in point}
    for w in cluster_weight_chunks(codes, n_clusters, n_boot, seed, chunk, expand=False):
        for k, r in stats.replicate(w).items():
            reps[k].append(r)
    out: dict = {"n_pairs": int(n), "n_clusters": n_clusters}
    for k, est in point.items():
        r = np.concatenate(reps[k]) if reps[k] else np.array([])
        out[k] = {"estimate": est, "ci": percentile_interval(r, level),
                  "se": float(np.std(r, ddof=1)) if r.size > 1 else float("nan")}
    return out


def mean_bootstrap(values, clusters, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95,
                   chunk: int = 256) -> dict:
    """Mean of per-pair values (e.g. s_int - s_rand) with a clustered percentile interval."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {"n": 0, "estimate": float("nan"), "ci": (float("nan"), float("nan")), "se": float("nan")}
    codes, n_clusters = cluster_codes(clusters)
    reps = [(w @ v) / w.sum(axis=1) for w in cluster_weight_chunks(codes, n_clusters, n_boot, seed, chunk)]
    r = np.concatenate(reps)
    return {"n": int(v.size), "estimate": float(v.mean()), "ci": percentile_interval(r, level),
            "se": float(np.std(r, ddof=1)) if r.size > 1 else float("nan")}


def detection_bootstrap_loop(y_int, y_sham, clusters, *, g_int=None, g_sham=None, n_boot: int = 2000,
                             seed: int = 0, level: float = 0.95) -> dict:
    """Reference: the same clustered bootstrap as a plain loop, one replicate at a time.

    It draws the identical cluster indices (one row of the index matrix per iteration, same
    generator stream), rebuilds the resampled pair list and computes d' and AUROC from it.
    """
    from tamperbench.stats.sdt import auroc, dprime

    yi = np.asarray(y_int, dtype=float)
    ys = np.asarray(y_sham, dtype=float)
    gi = yi if g_int is None else np.asarray(g_int, dtype=float)
    gs = ys if g_sham is None else np.asarray(g_sham, dtype=float)
    codes, n_clusters = cluster_codes(clusters)
    members = [np.flatnonzero(codes == c) for c in range(n_clusters)]
    rng = np.random.default_rng(seed)
    d_reps, a_reps = [], []
    for _ in range(n_boot):
        drawn = rng.integers(0, n_clusters, size=n_clusters)
        rows = [j for c in drawn for j in members[c]]
        d_reps.append(dprime(yi[rows], ys[rows]))
        a_reps.append(auroc(gi[rows], gs[rows]))
    return {"dprime": {"ci": percentile_interval(np.array(d_reps), level)},
            "auroc": {"ci": percentile_interval(np.array(a_reps), level)},
            "dprime_reps": np.array(d_reps), "auroc_reps": np.array(a_reps)}
