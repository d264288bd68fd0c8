"""The ETA cost model, by hand arithmetic (no model needed)."""

from __future__ import annotations

import pytest

from tamperbench.estimate import Calibration, EtaTracker, Plan, format_seconds, print_plan

CAL = Calibration(prefill_tps=100.0, step_a=0.05, step_b=0.01, seconds=1.0, batch=16)


def test_step_and_decode_seconds():
    assert CAL.step_seconds(1) == pytest.approx(0.06)
    assert CAL.step_seconds(64) == pytest.approx(0.05 + 0.64)
    # 1,000 row-tokens at batch 64: ceil(1000 / 64) = 16 steps of 0.69 s
    assert CAL.decode_seconds(1000, 64) == pytest.approx(16 * 0.69)
    # fewer tokens than the batch: one step of that many rows
    assert CAL.decode_seconds(10, 64) == pytest.approx(0.05 + 0.10)
    assert CAL.decode_seconds(0, 64) == 0.0
    # 500 prompt tokens at 100 tokens/s + the 1,000 row-tokens above
    assert CAL.seconds_for(500, 1000, 64) == pytest.approx(5.0 + 16 * 0.69)


def test_plan_eta_and_report():
    plan = Plan("sleight", units=10, stored=5, row_tokens=1000, prefill_tokens=500, batch=64).with_eta(CAL)
    assert plan.eta_seconds == pytest.approx(5.0 + 16 * 0.69)
    lines: list[str] = []
    print_plan(plan, CAL, lines.append)
    text = "\n".join(lines)
    assert "15 trials in the spec, 5 already stored, 10 to run" in text
    assert "at most 1,000" in text and "ETA: at most 16 s" in text  # 16.04 s
    assert "nothing was decoded or stored" in text


def test_format_seconds():
    assert format_seconds(59.4) == "59 s"
    assert format_seconds(61) == "1 min 01 s"
    assert format_seconds(3 * 3600 + 7 * 60 + 5) == "3 h 07 min"


def test_eta_tracker_calibrated_then_live():
    eta = EtaTracker(1000, CAL, batch=64, warmup=10.0)
    assert eta.remaining(0, 0.0) == pytest.approx(16 * 0.69)  # before warm-up: the calibration
    # after warm-up: the run's own rate; 200 tokens in 20 s = 10 tokens/s, 800 left = 80 s
    assert eta.remaining(200, 20.0) == pytest.approx(80.0)
    assert eta.text(200, 20.0) == "eta <= 1 min 20 s"
    assert EtaTracker(10).remaining(0, 0.0) is None and EtaTracker(10).text(0, 0.0) == "eta -"
