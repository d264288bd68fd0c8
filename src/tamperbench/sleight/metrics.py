"""Internal signals of a swap: Delta surprisal and Delta entropy (protocol, "Internal signals").

The Delta rule (``reference``, printed and saved everywhere a Delta is): the rule of the public Sleight
of Word implementation (``compute_metrics`` in ``src/awareness/runner.py``). From each swap's first
injected token, walk forward and collect the next ``window`` (8) tokens that are *not* injected,
skipping every injected token on the way (a later swap's forced tokens were not chosen by the
model). The windows of all swaps are concatenated, so a token inside two windows counts twice. A
trial's Delta is the mean of what was collected minus the mean over the whole clean answer, and a
model's figure is the plain mean over the touched trials that have a Delta.

There is no other pooling rule: a set of ``[p+n, p+n+window)`` positions with a mean of per-question
means reproduces no paper's numbers. Records store no Deltas, so reading a run needs no rule of its own.

Per swap (the matched branch the paper calls the more thorough approach): the reference window
minus the mean of the unaltered branch's own next ``window`` tokens decoded from the same prefix
with the trigger kept, giving one paired Delta per swap.

Intervals: a percentile bootstrap that resamples *questions* (the unit the protocol fixes) from a
seeded generator, so a rerun gives the same interval. Each resample takes the mean over all trials
of the drawn questions (the same estimator as the point figure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, Sequence

import numpy as np

SIGNALS = ("surprisal", "entropy_top20", "entropy_full")
Rule = Literal["reference"]
RULES: tuple[Rule, ...] = ("reference",)
RULE_TEXT = {
    "reference": "reference rule: next 8 non-injected tokens per swap, windows concatenated (overlaps count "
                 "twice), minus the clean-answer mean; model figure = mean over touched trials",
}


def reference_window(swap_pos: int, injected: Sequence[bool], window: int = 8) -> list[int]:
    """Positions of the next ``window`` non-injected tokens after the swap whose first injected token is at
    ``swap_pos`` (fewer when the answer ends first)."""
    out: list[int] = []
    i = swap_pos + 1
    while len(out) < window and i < len(injected):
        if not injected[i]:
            out.append(i)
        i += 1
    return out


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


def post_swap_positions(injected: Sequence[bool], swaps: Sequence[tuple[int, int]], window: int = 8,
                        rule: Rule = "reference") -> list[int]:
    """Every position that enters a trial's post-swap mean, with multiplicity under the reference rule."""
    if rule == "reference":
        return [i for p, _ in swaps for i in reference_window(p, injected, window)]
    raise ValueError(f"rule must be one of {RULES}, not {rule!r}")


@dataclass(frozen=True)
class DeltaParts:
    """The parts of one trial's Delta, as the reference's ``TrialMetrics`` holds them: the number of
    swaps, the clean answer's mean (baseline), the post-swap mean and their difference."""

    n_swaps: int
    baseline: float | None
    post_swap: float | None

    @property
    def delta(self) -> float | None:
        return None if self.post_swap is None or self.baseline is None else self.post_swap - self.baseline


def delta_parts(values: Sequence[float], injected: Sequence[bool], swaps: Sequence[tuple[int, int]],
                clean_values: Sequence[float], window: int = 8, rule: Rule = "reference") -> DeltaParts:
    """Baseline, post-swap mean and swap count of one trial (see :func:`trial_delta`)."""
    post = _mean([values[i] for i in post_swap_positions(injected, swaps, window, rule)])
    return DeltaParts(n_swaps=len(swaps), baseline=_mean(list(clean_values)), post_swap=post)


def trial_delta(values: Sequence[float], injected: Sequence[bool], swaps: Sequence[tuple[int, int]],
                clean_values: Sequence[float], window: int = 8, rule: Rule = "reference") -> float | None:
    """Post-swap mean minus the mean over the whole clean answer.

    ``swaps`` holds (position of the first injected token, number injected). None when there is no
    swap, no post-swap token (a swap at the very end of the budget) or no clean token.
    """
    return delta_parts(values, injected, swaps, clean_values, window, rule).delta


def paired_deltas(values: Sequence[float], injected: Sequence[bool], swaps: Sequence[tuple[int, int]],
                  matched: Sequence[Sequence[float]], window: int = 8) -> list[float | None]:
    """One Delta per swap: its reference window's mean minus the matched unaltered branch's window mean."""
    out: list[float | None] = []
    for (p, _), branch in zip(swaps, matched):
        post = _mean([values[i] for i in reference_window(p, injected, window)])
        ref = _mean(list(branch)[:window])
        out.append(None if post is None or ref is None else post - ref)
    return out


@dataclass(frozen=True)
class Estimate:
    """A per-model figure with its bootstrap interval over questions."""

    mean: float | None
    lo: float | None
    hi: float | None
    n_questions: int
    n_items: int  # trials (or swaps) that contributed

    def as_dict(self) -> dict:
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "n_questions": self.n_questions,
                "n_items": self.n_items}


def bootstrap_over_questions(items: Iterable[tuple[str, float | None]], *, n_resamples: int = 2000,
                             confidence: float = 0.95, seed: int = 0, weight: str = "question") -> Estimate:
    """A model's figure with a percentile bootstrap that resamples questions.

    ``weight="question"``: the mean of per-question means (every question weighs the same).
    ``weight="item"``: the plain mean over items (the reference's mean over touched trials); each
    resample pools all items of the drawn questions. None, NaN and inf values are dropped first.
    """
    if weight not in ("question", "item"):
        raise ValueError(f"weight must be 'question' or 'item', not {weight!r}")
    by_q: dict[str, list[float]] = {}
    n_items = 0
    for q, v in items:
        if v is None or not np.isfinite(v):
            continue
        by_q.setdefault(q, []).append(float(v))
        n_items += 1
    if not by_q:
        return Estimate(None, None, None, 0, 0)
    groups = [np.asarray(v) for _, v in sorted(by_q.items())]
    sums = np.array([g.sum() for g in groups])
    counts = np.array([len(g) for g in groups], dtype=float)
    if weight == "item":
        point = float(sums.sum() / counts.sum())
    else:
        point = float((sums / counts).mean())
    if len(groups) < 2:
        return Estimate(point, None, None, 1, n_items)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(groups), size=(n_resamples, len(groups)))
    if weight == "item":
        boots = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    else:
        boots = (sums / counts)[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return Estimate(point, float(lo), float(hi), len(groups), n_items)


def model_estimate(items: Iterable[tuple[str, float | None]], rule: Rule = "reference", *, seed: int = 0,
                   confidence: float = 0.95) -> Estimate:
    """A model's Delta under ``rule``: the mean over touched trials (reference)."""
    weight = {"reference": "item"}.get(rule)
    if weight is None:
        raise ValueError(f"rule must be one of {RULES}, not {rule!r}")
    return bootstrap_over_questions(items, seed=seed, confidence=confidence, weight=weight)


def trial_signals(trace, swaps: Sequence[tuple[int, int]], clean: dict, matched: dict[str, list[list[float]]],
                  window: int = 8) -> dict[str, object]:
    """All Deltas of one trial.

    ``delta_<signal>`` (reference rule, float|None) and ``paired_<signal>`` (a list, one per swap). ``trace`` has per-token lists ``surprisal``,
    ``entropy_full``, ``entropy_top20`` and ``injected`` (a FullTrace); ``clean`` the clean answer's
    lists; ``matched`` the per-swap matched-branch lists.
    """
    out: dict[str, object] = {}
    for sig in SIGNALS:
        vals = getattr(trace, sig)
        out[f"delta_{sig}"] = trial_delta(vals, trace.injected, swaps, clean[sig], window, "reference")
        out[f"paired_{sig}"] = paired_deltas(vals, trace.injected, swaps, matched[sig], window)
    return out
