"""benchmarks/_harness.py: rotated rounds, medians, ratios to the baseline, load and machine printed.

A scripted clock makes the times exact (each arm's call advances it by a fixed amount), so the
rotation, the medians and the per-round ratios are checked by hand; no model, no sleeping."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from _harness import Arm, compare, parser, report  # noqa: E402


def test_rounds_rotate_and_ratios_are_per_round_medians():
    now = [0.0]
    calls: list[str] = []

    def arm(name: str, cost: float, work: int | None):
        def fn():
            calls.append(name)
            now[0] += cost
            return work
        return Arm(name, fn)

    res = compare([arm("base", 2.0, 100), arm("fast", 0.5, 100), arm("mid", 1.0, None)], rounds=3,
                  warmup=True, clock=lambda: now[0])
    assert calls[:3] == ["base", "fast", "mid"]  # the untimed warm-up
    assert res.orders == [["base", "fast", "mid"], ["fast", "mid", "base"], ["mid", "base", "fast"]]
    base, fast, mid = res.arms
    assert base.seconds == [2.0] * 3 and fast.seconds == [0.5] * 3
    assert res.ratio("fast") == 4.0 and res.ratio("mid") == 2.0  # rates when both report work, else seconds
    assert fast.rate == 200.0 and mid.rate is None  # no work reported: time is the figure
    lines: list[str] = []
    report(res, unit="tok", echo=lines.append)
    assert lines[0].startswith("machine: ") and "cores" in lines[0]
    assert lines[1].startswith("load average: ") and "3 rotated round(s)" in lines[1]
    assert lines[3].split() == ["fast", "0.500", "s", "200", "tok/s", "x4.00", "vs", "base"]


def test_arms_doing_different_work_compare_by_rate():
    now = [0.0]

    def arm(name, cost, work):
        def fn():
            now[0] += cost
            return work
        return Arm(name, fn)

    # the candidate takes twice as long for four times the work: twice the rate, not half the speed
    res = compare([arm("base", 1.0, 10), arm("big", 2.0, 40)], rounds=2, warmup=False, clock=lambda: now[0])
    assert res.ratio("big") == 2.0


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        compare([Arm("a", lambda: None)], rounds=0)
    with pytest.raises(ValueError, match="no arms"):
        compare([], rounds=1)
    args = parser("Doc line.\nmore").parse_args(["--rounds", "5", "--quick"])
    assert (args.rounds, args.threads, args.quick) == (5, 1, True)
