"""Closed-set families (Section 3.2, Eqs. 8-9): ``above_chance`` on the interval's LOWER bound, and the margins
over the matched random perturbation and the observer bound, with the Track A observer kept out of the bound.

Why: judging ``above_chance`` on the upper bound (or the estimate) of the accuracy interval would call 4/10
correct at chance 1/4 "above chance"; no fast test caught that. The margins are the paired accuracy
differences, computed here by hand on rows chosen so each number is known. Pure: no model, no files.
"""

from __future__ import annotations

import pytest

from tamperbench.owmi.score.closedset import closedset_entry

PROBE = "Which of the 4 layers was altered?"  # chance 1/4


def _row(i, cond, report, *, tier=None, track="B_delayed"):
    return {"pair_id": f"p{i}", "item_id": f"item{i}", "condition": cond, "parse_ok": True, "layer": 2,
            "layer_report": report, "probe_text": PROBE, "observer_tier": tier, "track": track}


def _rows(correct: int, n: int = 10, track="B_delayed"):
    out = []
    for i in range(n):
        out += [_row(i, "intervention", 2 if i < correct else 0, track=track), _row(i, "sham", 0, track=track),
                _row(i, "random_matched", 2 if i < 2 else 0, track=track),
                _row(i, "observer", 2 if i == 0 else 0, tier=1, track=track),
                _row(i, "observer", 2 if i in (0, 1, 2) else 0, tier=3, track=track)]
    return out


def test_above_chance_is_read_on_the_lower_bound_of_the_interval():
    e = closedset_entry("localization", _rows(4), n_boot=400, seed=0)
    a = e["accuracy"]
    assert e["chance"] == 0.25 and a["estimate"] == pytest.approx(0.4)
    assert a["ci"][0] < 0.25 < a["ci"][1]  # the interval straddles chance: the upper bound alone would say yes
    assert a["above_chance"] is False
    e = closedset_entry("localization", _rows(10), n_boot=400, seed=0)
    assert e["accuracy"]["ci"][0] > 0.25 and e["accuracy"]["above_chance"] is True


def test_margins_over_random_matched_and_the_observer_bound():
    e = closedset_entry("localization", _rows(10), n_boot=400, seed=0)
    assert e["margin_vs_sham"]["estimate"] == pytest.approx(1.0)
    rnd = e["margin_vs_random_matched"]  # random correct on items 0-1: 1 - 2/10
    assert rnd["pairs"] == 10 and rnd["estimate"] == pytest.approx(0.8) and rnd["above_zero"] is True
    assert rnd["ci"][0] <= 0.8 <= rnd["ci"][1]
    obs = e["margin_vs_observer"]  # max over tiers: tier 3 correct on items 0-2: 1 - 3/10
    assert obs["pairs"] == 10 and obs["estimate"] == pytest.approx(0.7) and obs["above_zero"] is True
    assert "margin_vs_observer_input_side" not in e


def test_a_track_a_observer_is_an_input_side_baseline():
    e = closedset_entry("localization", _rows(10, track="A"), n_boot=100, seed=0)
    assert "margin_vs_observer" not in e
    assert e["margin_vs_observer_input_side"]["estimate"] == pytest.approx(0.7)
    assert "input-side baseline" in e["observer_note"]


@pytest.mark.parametrize("n,clusters", [(4, 2), (30, 9), (17, 17)])
def test_vectorised_macro_f1_bootstrap_equals_the_sklearn_loop_exactly(n, clusters):
    # the speed fix of owmi score (docs/benchmarks.md) must not move a number: same draws, same F1 arithmetic
    import numpy as np

    from tamperbench.owmi.score.closedset import _macro_f1_boot, _macro_f1_boot_loop
    from tamperbench.owmi.protocol.probes import categories

    labels, rng = list(categories()), np.random.default_rng(n)
    truth = [labels[i] for i in rng.integers(0, 3, n)]
    pred = [labels[i] for i in rng.integers(0, len(labels), n)]
    cl = [f"c{i}" for i in rng.integers(0, clusters, n)]
    assert _macro_f1_boot(truth, pred, cl, labels, 200, 1) == _macro_f1_boot_loop(truth, pred, cl, labels, 200, 1)
