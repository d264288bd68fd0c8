"""Internal signals of a swap: Delta surprisal and Delta entropy (protocol, "Internal signals").

Per trial (the paper's definition): take the ``window`` (8) tokens after each swap's injected
tokens, drop any injected token inside them (a later swap's forced tokens: the model did not choose
them), pool the positions of all windows (each token once), and subtract the mean over the whole
clean answer of the same question. Computed for surprisal, full-vocabulary entropy and top-20
renormalised entropy (the paper's estimate).

Per swap (the matched branch the paper calls the more thorough approach): the same window minus the
mean of the unaltered branch's own next ``window`` tokens decoded from the same prefix with the
trigger kept, giving one paired Delta per swap.

Per model: the mean over questions of per-question means, with a percentile bootstrap interval that
resamples questions (the unit the protocol fixes), from a seeded generator so a rerun gives the same
interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

SIGNALS = ("surprisal", "entropy_top20", "entropy_full")


def window_positions(swap_pos: int, n_injected: int, injected: Sequence[bool], window: int = 8) -> list[int]:
    """Indices of the ``window`` tokens after one swap's injected run, injected tokens excluded."""
    start = swap_pos + n_injected
    stop = min(len(injected), start + window)
    return [i for i in range(start, stop) if not injected[i]]


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


def trial_delta(values: Sequence[float], injected: Sequence[bool], swaps: Sequence[tuple[int, int]],
                clean_values: Sequence[float], window: int = 8) -> float | None:
    """Mean over the pooled post-swap windows minus the mean over the whole clean answer.

    ``swaps`` holds (position of the first injected token, number injected). None when there is no
    swap, no post-swap token (a swap at the very end of the budget) or no clean token.
    """
    pos = sorted({i for p, n in swaps for i in window_positions(p, n, injected, window)})
    post = _mean([values[i] for i in pos])
    base = _mean(list(clean_values))
    return None if post is None or base is None else post - base


def paired_deltas(values: Sequence[float], injected: Sequence[bool], swaps: Sequence[tuple[int, int]],
                  matched: Sequence[Sequence[float]], window: int = 8) -> list[float | None]:
    """One Delta per swap: its window's mean minus the matched unaltered branch's window mean."""
    out: list[float | None] = []
    for (p, n), branch in zip(swaps, matched):
        post = _mean([values[i] for i in window_positions(p, n, injected, window)])
        ref = _mean(list(branch)[:window])
        out.append(None if post is None or ref is None else post - ref)
    return out


@dataclass(frozen=True)
class Estimate:
    """A per-model mean over questions with its bootstrap interval."""

    mean: float | None
    lo: float | None
    hi: float | None
    n_questions: int
    n_items: int  # trials (or swaps) that contributed

    def as_dict(self) -> dict:
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "n_questions": self.n_questions,
                "n_items": self.n_items}


def bootstrap_over_questions(items: Iterable[tuple[str, float | None]], *, n_resamples: int = 2000,
                             confidence: float = 0.95, seed: int = 0) -> Estimate:
    """Mean of per-question means, with a percentile bootstrap that resamples questions."""
    by_q: dict[str, list[float]] = {}
    n_items = 0
    for q, v in items:
        if v is None or not np.isfinite(v):
            continue
        by_q.setdefault(q, []).append(float(v))
        n_items += 1
    if not by_q:
        return Estimate(None, None, None, 0, 0)
    per_q = np.array([np.mean(v) for _, v in sorted(by_q.items())])
    point = float(per_q.mean())
    if len(per_q) < 2:
        return Estimate(point, None, None, 1, n_items)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(per_q), size=(n_resamples, len(per_q)))
    boots = per_q[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return Estimate(point, float(lo), float(hi), len(per_q), n_items)


def trial_signals(trace, swaps: Sequence[tuple[int, int]], clean: dict, matched: dict[str, list[list[float]]],
                  window: int = 8) -> dict[str, object]:
    """All Deltas of one trial: ``delta_<signal>`` (float|None) and ``paired_<signal>`` (list per swap).

    ``trace`` has per-token lists ``surprisal``, ``entropy_full``, ``entropy_top20`` and ``injected``
    (a FullTrace); ``clean`` the clean answer's lists; ``matched`` the per-swap matched-branch lists.
    """
    out: dict[str, object] = {}
    for sig in SIGNALS:
        vals = getattr(trace, sig)
        out[f"delta_{sig}"] = trial_delta(vals, trace.injected, swaps, clean[sig], window)
        out[f"paired_{sig}"] = paired_deltas(vals, trace.injected, swaps, matched[sig], window)
    return out
