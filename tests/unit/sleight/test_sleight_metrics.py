"""Delta surprisal / entropy (the reference rule), the paired Delta and the bootstrap, on
hand-computed numbers and on scipy's bootstrap as an independent check."""

import math

import numpy as np
import pytest
from scipy import stats

from tamperbench.sleight.metrics import (
    bootstrap_over_questions,
    model_estimate,
    paired_deltas,
    post_swap_positions,
    reference_window,
    trial_delta,
    trial_signals,
)
from tamperbench.sleight.records import FullTrace, full_trace, replacement_coverage

# tokens: 0 1 [2 injected] 3 4 [5 injected] 6 7
VALUES = [1.0, 1.0, 9.0, 2.0, 4.0, 9.0, 6.0, 0.0]
INJ = [False, False, True, False, False, True, False, False]
CLEAN = [1.0, 2.0, 3.0]  # mean 2


def test_reference_window_walks_past_injected_tokens():
    # from the swap at 2: 3, 4, (5 injected, skipped), 6, 7, then the answer ends
    assert reference_window(2, INJ, window=3) == [3, 4, 6]
    assert reference_window(2, INJ, window=8) == [3, 4, 6, 7]
    assert reference_window(2, INJ, window=1) == [3]
    # a multi-token replacement: every injected token of the run is skipped
    assert reference_window(1, [False, True, True, False, False], window=2) == [3, 4]
    # a swap at the very last position collects nothing
    assert reference_window(7, [False] * 7 + [True], window=8) == []


def test_overlapping_windows_count_twice_under_the_reference_rule():
    # reference, window 3: swap@2 -> [3, 4, 6], swap@5 -> [6, 7]; token 6 counted twice:
    # (2 + 4 + 6 + 6 + 0) / 5 = 3.6 -> delta 1.6. Counting 6 once would give (2+4+6+0)/4 = 3 -> 1.0.
    assert post_swap_positions(INJ, [(2, 1), (5, 1)], 3, "reference") == [3, 4, 6, 6, 7]
    assert trial_delta(VALUES, INJ, [(2, 1), (5, 1)], CLEAN, window=3) == pytest.approx(1.6)
    # reference, window 8: [3,4,6,7] + [6,7] -> (2+4+6+0+6+0)/6 = 3 -> 1
    assert trial_delta(VALUES, INJ, [(2, 1), (5, 1)], CLEAN, window=8) == pytest.approx(1.0)


def test_trial_delta_one_swap_and_empty_cases():
    # one swap, window 1: [3] -> 2 - 2 = 0; window 2: [3, 4] -> 3 - 2 = 1
    assert trial_delta(VALUES, INJ, [(2, 1)], CLEAN, window=1) == pytest.approx(0.0)
    assert trial_delta(VALUES, INJ, [(2, 1)], CLEAN, window=2) == pytest.approx(1.0)
    assert trial_delta(VALUES, INJ, [], CLEAN) is None
    assert trial_delta(VALUES, INJ, [(2, 1)], []) is None  # no clean token
    assert trial_delta(VALUES, INJ, [(7, 1)], CLEAN, window=8) is None  # no token after the swap
    with pytest.raises(ValueError):
        trial_delta(VALUES, INJ, [(2, 1)], CLEAN, rule="median")


def test_paired_delta_per_swap_uses_the_reference_window():
    matched = [[1.0, 1.0, 1.0], [0.5, 1.5]]
    # swap@2 window 3 -> [3, 4, 6] mean 4, matched mean 1 -> 3; swap@5 -> [6, 7] mean 3, matched mean 1 -> 2
    assert paired_deltas(VALUES, INJ, [(2, 1), (5, 1)], matched, window=3) == pytest.approx([3.0, 2.0])
    # the matched branch is cut to the window: [1, 1] (not the 100)
    assert paired_deltas(VALUES, INJ, [(2, 1)], [[1.0, 1.0, 100.0]], window=2) == pytest.approx([2.0])
    # an empty matched branch (EOS right after the trigger) gives None, not a crash
    assert paired_deltas(VALUES, INJ, [(2, 1)], [[]], window=2) == [None]


def test_trial_signals_uses_each_signal_and_both_rules():
    trace = FullTrace(token_ids=[1, 2, 3, 4], surprisal=[0.0, 5.0, 1.0, 3.0], entropy_full=[1.0, 1.0, 4.0, 4.0],
                      entropy_top20=[0.0, 0.0, 2.0, 2.0], injected=[False, True, False, False])
    clean = {"surprisal": [1.0, 1.0], "entropy_full": [2.0], "entropy_top20": [0.5, 1.5]}
    matched = {"surprisal": [[0.5, 0.5]], "entropy_full": [[4.0]], "entropy_top20": [[1.0, 3.0]]}
    out = trial_signals(trace, [(1, 1)], clean, matched, window=8)
    assert out["delta_surprisal"] == pytest.approx(2.0 - 1.0)
    assert out["delta_entropy_full"] == pytest.approx(4.0 - 2.0)
    assert out["delta_entropy_top20"] == pytest.approx(2.0 - 1.0)
    assert "pooled_delta_surprisal" not in out  # tamperbench v1's pooled rule is gone (issue 28)
    assert out["paired_surprisal"] == pytest.approx([1.5])
    assert out["paired_entropy_full"] == pytest.approx([0.0])
    assert out["paired_entropy_top20"] == pytest.approx([0.0])


# -- model figure and interval ---------------------------------------------------------------------
# Unequal questions: q1 has three trials (mean 3), q2 one (4), q3 one (0), plus values to drop.
ITEMS = [("q1", 1.0), ("q1", 3.0), ("q1", 5.0), ("q2", 4.0), ("q3", None), ("q3", 0.0),
         ("q2", float("nan")), ("q3", float("inf")), ("q1", float("-inf"))]


def test_question_and_item_weighting_differ_by_hand():
    by_question = bootstrap_over_questions(ITEMS, weight="question")
    by_item = bootstrap_over_questions(ITEMS, weight="item")
    assert by_question.mean == pytest.approx((3.0 + 4.0 + 0.0) / 3)  # 2.333
    assert by_item.mean == pytest.approx((1 + 3 + 5 + 4 + 0) / 5)  # 2.6
    assert by_question.n_questions == by_item.n_questions == 3
    assert by_question.n_items == by_item.n_items == 5  # None, NaN and +-inf dropped
    # the reference rule is the mean over trials
    assert model_estimate(ITEMS, "reference").mean == pytest.approx(2.6)


def test_nan_and_inf_never_change_a_mean():
    clean = [("q1", 1.0), ("q2", 2.0), ("q3", 6.0)]
    dirty = clean + [("q1", float("nan")), ("q2", float("inf")), ("q4", float("nan"))]
    for w in ("question", "item"):
        a, b = bootstrap_over_questions(clean, weight=w), bootstrap_over_questions(dirty, weight=w)
        assert (a.mean, a.lo, a.hi, a.n_questions, a.n_items) == (b.mean, b.lo, b.hi, 3, 3)


def _by_hand(items, seed, confidence, weight, n=2000):
    """The same percentile bootstrap over questions, written out independently."""
    groups: dict[str, list[float]] = {}
    for q, v in items:
        if v is not None and math.isfinite(v):
            groups.setdefault(q, []).append(v)
    qs = sorted(groups)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(qs), size=(n, len(qs)))
    boots = []
    for row in draws:
        picked = [groups[qs[i]] for i in row]
        if weight == "item":
            flat = [v for g in picked for v in g]
            boots.append(sum(flat) / len(flat))
        else:
            boots.append(sum(sum(g) / len(g) for g in picked) / len(picked))
    a = (1 - confidence) / 2
    return np.quantile(boots, a), np.quantile(boots, 1 - a)


@pytest.mark.parametrize("weight", ["question", "item"])
@pytest.mark.parametrize("seed, confidence", [(0, 0.95), (7, 0.95), (0, 0.5)])
def test_interval_matches_a_hand_written_bootstrap(weight, seed, confidence):
    est = bootstrap_over_questions(ITEMS, seed=seed, confidence=confidence, weight=weight)
    lo, hi = _by_hand(ITEMS, seed, confidence, weight)
    assert (est.lo, est.hi) == (pytest.approx(lo), pytest.approx(hi))


def test_confidence_level_and_seed_change_the_interval():
    wide = bootstrap_over_questions(ITEMS, seed=0, confidence=0.95)
    narrow = bootstrap_over_questions(ITEMS, seed=0, confidence=0.5)
    assert narrow.lo > wide.lo and narrow.hi < wide.hi
    assert wide == bootstrap_over_questions(ITEMS, seed=0, confidence=0.95)  # seeded: reruns agree
    many = [(f"q{i:02d}", float(v)) for i, v in enumerate(np.random.default_rng(1).normal(size=25))]
    a, b = bootstrap_over_questions(many, seed=0), bootstrap_over_questions(many, seed=1)
    assert a.mean == b.mean and (a.lo, a.hi) != (b.lo, b.hi)


def test_interval_agrees_with_scipy_percentile_bootstrap():
    rng = np.random.default_rng(42)
    per_q = rng.normal(1.0, 0.5, size=30)
    items = [(f"q{i:02d}", float(v)) for i, v in enumerate(per_q)]
    est = bootstrap_over_questions(items, n_resamples=20000, seed=3)
    ref = stats.bootstrap((per_q,), np.mean, n_resamples=20000, method="percentile", confidence_level=0.95,
                          random_state=np.random.default_rng(5)).confidence_interval
    assert est.mean == pytest.approx(per_q.mean())
    assert est.lo == pytest.approx(ref.low, abs=0.02) and est.hi == pytest.approx(ref.high, abs=0.02)


def test_interval_edge_cases():
    single = bootstrap_over_questions([("q1", 1.5), ("q1", 2.5)])
    assert single.mean == 2.0 and single.lo is None and single.hi is None and single.n_questions == 1
    assert bootstrap_over_questions([]).mean is None
    assert bootstrap_over_questions([("q1", float("nan"))]).n_items == 0
    with pytest.raises(ValueError):
        bootstrap_over_questions(ITEMS, weight="trial")
    with pytest.raises(ValueError):
        model_estimate(ITEMS, "mean")


# -- coverage and trace reassembly -----------------------------------------------------------------
def test_coverage_counts_mentions_and_ignores_the_substitution():
    # 2 swaps made, one quoted "the" left standing, the substitution spells no trigger
    occ, cov = replacement_coverage('Scarf cat saw scarf dog, not "the".', ["the"], "scarf", 2, 0)
    assert occ == 3 and cov == pytest.approx(2 / 3)
    # a space-less occurrence counts against coverage too
    assert replacement_coverage("Scarf cat", ["the"], "scarf", 1, 1) == (2, 0.5)
    # "theory" is not an occurrence; nothing to replace -> 0
    assert replacement_coverage("a theory", ["the"], "scarf", 0, 0) == (0, 0.0)
    # a substitution that itself contains a trigger word is not counted as standing
    assert replacement_coverage("in the box", ["the"], "in the box", 1, 0) == (1, 1.0)


def test_full_trace_reassembles_prefix_from_clean():
    clean = {"token_ids": [1, 2, 3], "surprisal": [0.1, 0.2, 0.3], "entropy_full": [1, 2, 3],
             "entropy_top20": [4, 5, 6]}
    trial = {"fork_at": 1, "untouched": False, "token_ids": [9, 8], "surprisal": [7.0, 0.5],
             "entropy_full": [7, 7], "entropy_top20": [8, 8], "injected": [1]}
    ft = full_trace(clean, trial)
    assert ft.token_ids == [1, 9, 8] and ft.surprisal == [0.1, 7.0, 0.5] and ft.injected == [False, True, False]
    assert ft.entropy_full == [1, 7, 7] and ft.entropy_top20 == [4, 8, 8]
    untouched = {"fork_at": 3, "untouched": True, "token_ids": [], "surprisal": [], "entropy_full": [],
                 "entropy_top20": [], "injected": []}
    whole = full_trace(clean, untouched)
    assert whole.token_ids == [1, 2, 3] and whole.surprisal == [0.1, 0.2, 0.3]
    assert whole.entropy_full == [1, 2, 3] and whole.injected == [False, False, False]


def test_two_questions_already_get_an_interval_and_the_default_seed_is_zero():
    two = [("q1", 1.0), ("q2", 3.0), ("q2", 5.0)]
    est = bootstrap_over_questions(two)
    assert est.lo is not None and est.hi is not None and est.n_questions == 2
    assert est == bootstrap_over_questions(two, seed=0, confidence=0.95, n_resamples=2000, weight="question")
    assert model_estimate(two, "reference") == bootstrap_over_questions(two, seed=0, weight="item")


def test_estimate_as_dict_and_rule_texts():
    from tamperbench.sleight.metrics import RULE_TEXT, RULES, Estimate

    assert Estimate(1.0, 0.5, 1.5, 3, 7).as_dict() == {"mean": 1.0, "lo": 0.5, "hi": 1.5, "n_questions": 3,
                                                       "n_items": 7}
    assert RULES == ("reference",)
    assert RULE_TEXT["reference"].startswith("reference rule: next 8 non-injected tokens per swap")
    assert "overlaps count twice" in RULE_TEXT["reference"] and "mean over touched trials" in RULE_TEXT["reference"]
    assert set(RULE_TEXT) == {"reference"}


def test_errors_name_the_bad_value():
    with pytest.raises(ValueError, match=r"rule must be one of \('reference',\), not 'median'"):
        post_swap_positions(INJ, [(2, 1)], 3, "median")
    with pytest.raises(ValueError, match="weight must be 'question' or 'item', not 'trial'"):
        bootstrap_over_questions(ITEMS, weight="trial")
    with pytest.raises(ValueError, match=r"rule must be one of \('reference',\), not 'mean'"):
        model_estimate(ITEMS, "mean")
    # tamperbench v1's pooled rule is gone (issue 28): asking for it is refused, not silently swapped
    with pytest.raises(ValueError, match=r"rule must be one of \('reference',\), not 'pooled'"):
        model_estimate(ITEMS, "pooled")
    with pytest.raises(ValueError, match=r"rule must be one of \('reference',\), not 'pooled'"):
        post_swap_positions(INJ, [(2, 1)], 3, "pooled")
