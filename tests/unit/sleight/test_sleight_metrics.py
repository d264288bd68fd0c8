"""Delta surprisal / entropy and the paired matched-branch Delta, on hand-computed numbers."""

import math

import pytest

from tamperbench.sleight.metrics import (
    bootstrap_over_questions,
    paired_deltas,
    trial_delta,
    trial_signals,
    window_positions,
)
from tamperbench.sleight.records import FullTrace, full_trace, replacement_coverage


def test_window_skips_the_injected_run_and_clips_at_the_end():
    inj = [False, True, True, False, False, False]
    # swap at 1 with 2 injected tokens: window starts at 3, clipped at len 6
    assert window_positions(1, 2, inj, window=8) == [3, 4, 5]
    assert window_positions(1, 2, inj, window=2) == [3, 4]
    # a swap at the very last position has an empty window
    assert window_positions(5, 1, [False] * 5 + [True], window=8) == []


def test_trial_delta_hand_computed():
    # tokens: 0 1 [2 injected] 3 4 [5 injected] 6 7
    values = [1.0, 1.0, 9.0, 2.0, 4.0, 9.0, 6.0, 0.0]
    inj = [False, False, True, False, False, True, False, False]
    clean = [1.0, 2.0, 3.0]  # mean 2
    # window 3 after swap@2: positions 3,4,5 -> 5 is injected -> {3,4}; after swap@5: {6,7}
    # pooled {3,4,6,7}: (2+4+6+0)/4 = 3  -> delta 3 - 2 = 1
    assert trial_delta(values, inj, [(2, 1), (5, 1)], clean, window=3) == pytest.approx(1.0)
    # overlapping windows count each token once: window 8 -> {3,4,6,7} again
    assert trial_delta(values, inj, [(2, 1), (5, 1)], clean, window=8) == pytest.approx(1.0)
    # one swap, window 2: {3,4} -> mean 3 -> delta 1; window 1: {3} -> 2 - 2 = 0
    assert trial_delta(values, inj, [(2, 1)], clean, window=1) == pytest.approx(0.0)
    assert trial_delta(values, inj, [], clean) is None


def test_paired_delta_per_swap():
    values = [1.0, 1.0, 9.0, 2.0, 4.0, 9.0, 6.0, 0.0]
    inj = [False, False, True, False, False, True, False, False]
    matched = [[1.0, 1.0, 1.0], [0.5, 1.5]]
    # swap@2 window 3 -> {3,4} mean 3, matched mean 1 -> 2 ; swap@5 -> {6,7} mean 3, matched mean 1 -> 2
    assert paired_deltas(values, inj, [(2, 1), (5, 1)], matched, window=3) == pytest.approx([2.0, 2.0])
    # matched branch longer than the window is cut to the window
    assert paired_deltas(values, inj, [(2, 1)], [[1.0, 1.0, 100.0]], window=2) == pytest.approx([2.0])
    # an empty matched branch (EOS right after the trigger) gives None, not a crash
    assert paired_deltas(values, inj, [(2, 1)], [[]], window=2) == [None]


def test_trial_signals_uses_each_signal():
    trace = FullTrace(token_ids=[1, 2, 3, 4], surprisal=[0.0, 5.0, 1.0, 3.0], entropy_full=[1.0, 1.0, 4.0, 4.0],
                      entropy_top20=[0.0, 0.0, 2.0, 2.0], injected=[False, True, False, False])
    clean = {"surprisal": [1.0, 1.0], "entropy_full": [2.0], "entropy_top20": [0.5, 1.5]}
    matched = {"surprisal": [[0.5, 0.5]], "entropy_full": [[4.0]], "entropy_top20": [[1.0, 3.0]]}
    out = trial_signals(trace, [(1, 1)], clean, matched, window=8)
    assert out["delta_surprisal"] == pytest.approx(2.0 - 1.0)
    assert out["delta_entropy_full"] == pytest.approx(4.0 - 2.0)
    assert out["delta_entropy_top20"] == pytest.approx(2.0 - 1.0)
    assert out["paired_surprisal"] == pytest.approx([1.5])
    assert out["paired_entropy_full"] == pytest.approx([0.0])
    assert out["paired_entropy_top20"] == pytest.approx([0.0])


def test_bootstrap_is_over_questions_and_seeded():
    items = [("q1", 1.0), ("q1", 3.0), ("q2", 4.0), ("q3", None), ("q3", 0.0)]
    est = bootstrap_over_questions(items, seed=0)
    # per-question means 2, 4, 0 -> 2
    assert est.mean == pytest.approx(2.0) and est.n_questions == 3 and est.n_items == 4
    assert 0.0 <= est.lo <= est.mean <= est.hi <= 4.0
    assert est == bootstrap_over_questions(items, seed=0)
    single = bootstrap_over_questions([("q1", 1.5)])
    assert single.mean == 1.5 and single.lo is None
    assert bootstrap_over_questions([]).mean is None


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
    untouched = {"fork_at": 3, "untouched": True, "token_ids": [], "surprisal": [], "entropy_full": [],
                 "entropy_top20": [], "injected": []}
    assert full_trace(clean, untouched).token_ids == [1, 2, 3]
    assert not math.isnan(sum(full_trace(clean, untouched).surprisal))
