"""``--dry-run`` on the real CLI: trial count, token count and an ETA; nothing decoded or stored.

Counts are checked against hand arithmetic from the preset (100 questions x 101 substitutions x
256 tokens), not against the estimator's own functions."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from tamperbench.quote.cli import app as quote_app
from tamperbench.sleight.cli import app as sleight_app
from tamperbench.store import RunStore

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("shared_model_loads")]


def test_sleight_paper_dry_run_prints_plan_and_creates_nothing(tmp_path):
    run_dir = tmp_path / "RUN"
    res = CliRunner().invoke(sleight_app, ["run", "--preset", "paper", "--dry-run", "--out", str(run_dir),
                                           "--device", "cpu"], terminal_width=200)
    assert res.exit_code == 0, res.output
    out = res.output
    assert "10100 trials in the spec, 0 already stored, 10100 to run" in out
    # prefix row + 101 trials per question, each to the 256-token budget: 100 x 102 x 256
    assert f"at most {100 * 102 * 256:,}" in out
    assert re.search(r"ETA: at most \d+ (h|min|s)", out), out
    assert not run_dir.exists()  # nothing decoded, nothing stored, not even a directory


def test_sleight_dry_run_counts_what_is_stored(tmp_path):
    run_dir = tmp_path / "run"
    small = ["run", "--preset", "quick", "--questions", "1", "--words", "1", "--max-new-tokens", "4",
             "--device", "cpu", "--out", str(run_dir)]
    assert CliRunner().invoke(sleight_app, small).exit_code == 0
    with RunStore.open_existing(run_dir, read_only=True) as store:
        before = store.count("sleight_trials"), store.count("sleight_clean")
    assert before == (1, 1)
    bigger = [*small[:4], "2", *small[5:], "--dry-run"]  # --words 2: one stored, one to run
    res = CliRunner().invoke(sleight_app, bigger, terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "2 trials in the spec, 1 already stored, 1 to run" in res.output
    # one question pending: its prefix row + 1 trial, 4 tokens each
    assert "at most 8 " in res.output
    # rows at once, as the engine sizes them (sleight/engine.py choose_slots): the pending question's
    # prefix row + its 1 trial x (1 + the 8-step matched-branch window) = 10, not the load-time 64
    assert "; batch 10" in res.output
    with RunStore.open_existing(run_dir, read_only=True) as store:
        assert (store.count("sleight_trials"), store.count("sleight_clean")) == before


def test_quote_dry_run(tmp_path):
    run_dir = tmp_path / "q"
    res = CliRunner().invoke(quote_app, ["run", "--dry-run", "--out", str(run_dir), "--device", "cpu"],
                             terminal_width=200)
    assert res.exit_code == 0, res.output
    # standard preset: 37 items x 2 arms, 96 new tokens each
    assert "74 trials in the spec, 0 already stored, 74 to run" in res.output
    assert f"at most {74 * 96:,}" in res.output
    assert "ETA: at most" in res.output and not run_dir.exists()
    # the runner's calls (quote/runner.py call_size): no --batch-size packs up to 4 x 64 trials per
    # call and decodes a call's rows together, so the ETA is for one wave of 74 rows, not 64 + 10
    assert "batch 74" in res.output and "1 generation call(s) of up to 256 trials" in res.output, res.output
    # prefill as generate_chat feeds it under cascade attention: the prefix tree (system prompt once,
    # each document once, each item's instruction once for both arms): 6,023 tokens, as the quote
    # benchmark's shared run reports feeding (benchmarks/quote_throughput.py --preset standard)
    assert "prompt tokens to prefill: 6,023;" in res.output, res.output


def test_quote_dry_run_prefill_on_the_copy_path(tmp_path, monkeypatch):
    """Without cascade attention the prompts share one level only (each group's prefix once):
    7,353 tokens, the sixth session's measured prefill of the standard preset."""
    monkeypatch.setenv("TAMPERBENCH_SHARED_PREFIX_ATTENTION", "copy")
    res = CliRunner().invoke(quote_app, ["run", "--dry-run", "--out", str(tmp_path / "q"), "--device", "cpu"],
                             terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "prompt tokens to prefill: 7,353;" in res.output, res.output


def test_quote_dry_run_explicit_batch_size_is_the_cap(tmp_path):
    res = CliRunner().invoke(quote_app, ["run", "--dry-run", "--out", str(tmp_path / "q"), "--device", "cpu",
                                         "--batch-size", "16"], terminal_width=200)
    assert res.exit_code == 0, res.output
    # documents are kept whole in calls of about 16 trials: more than 74 / 16 rounded up is impossible
    # to beat, and every call decodes at most 16 rows
    assert "batch 16" in res.output, res.output
    calls = int(re.search(r"(\d+) generation call\(s\) of up to 16 trials", res.output).group(1))
    assert calls >= 5, res.output


def _stored_owmi_records(run_dir, spec, keys):
    """A run directory of ``spec`` holding records under ``keys`` (the runner's own keys), the
    other fields placeholders: a dry run reads keys only."""
    from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun

    store = RunStore.open(run_dir, spec)
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, [OwmiRun(
        key=k, pair_id="p", cell_id="c", model="embedded", model_revision="r", dtype="float32", quantized=True,
        temperature=0.0, top_p=1.0, max_new_tokens=20, readout="generated", benchmark="builtin", domain="knowledge", item_id="i",
        item_provenance="{}", object_kind="resid_post", site="resid_post.12", layer=12, operator="add", dose=64.0,
        positions="task", when="prefill", seed=0, condition="sham", hook_scope="active", track="A",
        probe_family="detection", probe_text="p", prompt_text="t", prompt_ids=[1], intervened_positions=[],
        response="{}", finish_reason="stop", parse_ok=True) for k in keys])
    store.close()


def test_owmi_quick_dry_run_counts_records_tokens_and_what_is_stored(tmp_path):
    """The quick preset by hand: 2 items x 2 seeds x 3 (operator, dose) = 12 units, each Track A x 5
    probe families x 2 scopes x (4 model conditions + 1 observer tier) = 50 records, 600 in all;
    decode bound 600 probe answers x 64 tokens + 12 units x 4 model conditions x 12 task tokens =
    38,976. Then one unit stored: the plan says 50 stored, 550 to run, and the decode bound drops by
    that unit's 50 x 64 + 4 x 12."""
    from tamperbench.owmi.cli import app as owmi_app
    from tamperbench.owmi.run.plan import load_items, planned_keys, unit_coords
    from tamperbench.owmi.run.spec import quick_spec

    run_dir = tmp_path / "o"
    args = ["run", "--preset", "quick", "--dry-run", "--out", str(run_dir)]
    res = CliRunner().invoke(owmi_app, args, terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "600 records in the spec, 0 already stored, 600 to run" in res.output, res.output
    assert f"at most {600 * 64 + 12 * 4 * 12:,}" in res.output
    assert re.search(r"ETA: at most \d+", res.output) and not run_dir.exists()

    spec = quick_spec()
    obj, op, item = spec.objects[0], spec.operators[0], load_items("builtin", 2)[0]
    keys = [k for k, _, _ in planned_keys(spec, unit_coords(spec, "embedded", "builtin", obj, op, item, 0), [])]
    assert len(keys) == 50
    _stored_owmi_records(run_dir, spec, keys)
    res = CliRunner().invoke(owmi_app, args, terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "600 records in the spec, 50 already stored, 550 to run" in res.output, res.output
    assert f"at most {550 * 64 + 11 * 4 * 12:,}" in res.output
    with RunStore.open_existing(run_dir, read_only=True) as store:
        assert store.count("owmi_runs") == 50  # the dry run wrote nothing


def test_calibration_fits_the_per_row_cost_between_packed_batches(embedded_backend):
    """The ETA's per-row cost is the slope between 4 and 32 rows, both through the packed linears,
    at the plan's context: a 1-row step runs another kernel that costs about what 4 packed rows do,
    and the old 1-vs-16 slope came out 0.0 ms a row, so `--preset paper` (128 rows) was promised
    2,255 tokens/s. 32 rows do 8x the arithmetic of 4 (about 28 vs 3.5 model GFLOP a step on this
    model), far past any timing noise, so the fitted slope must be positive."""
    from tamperbench.estimate import calibrate

    cal = calibrate(embedded_backend, batch=128, context=171)
    assert (cal.low, cal.batch) == (4, 32)
    assert cal.step_b > 0
    small = calibrate(embedded_backend, batch=3)  # at most 4 rows: fitted from 1 row
    assert (small.low, small.batch) == (1, 3)
