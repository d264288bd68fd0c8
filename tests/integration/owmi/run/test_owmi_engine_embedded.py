"""The OWMI engine end to end on the real embedded model (SmolLM2-135M): one item, the detection
probe, Tracks A and B (genuinely delayed), both scopes, every condition, a tier-2 observer routed
to a second model spec (here the embedded model again: no other model is available offline)."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from tamperbench.owmi.protocol.records import RUNS_TABLE, analysable
from tamperbench.owmi.run.runner import run
from tamperbench.owmi.run.spec import quick_spec
from tamperbench.store import RunStore

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def owmi_bar():
    """What the run's progress bar printed and the run's wall time (test_bar_counts_down_the_dry_run_bound)."""
    return {"text": io.StringIO()}


@pytest.fixture(scope="module")
def owmi_run(tmp_path_factory, embedded_backend, owmi_bar):
    out = tmp_path_factory.mktemp("owmi") / "run"
    spec = quick_spec(items_per_benchmark=1, probes=["detection"], tracks=["A", "B_delayed"], calibration_steps=2, seeds=[0],
                      operators=[{"name": "add", "dose": 64.0}],
                      observer_models=["embedded"], task_max_new_tokens=4, probe_max_new_tokens=8)
    t0 = time.perf_counter()
    rep = run(spec, out, console=Console(file=owmi_bar["text"], width=300))
    owmi_bar["wall"] = time.perf_counter() - t0
    with RunStore.open_existing(out, read_only=True) as st:
        rows = st.rows(RUNS_TABLE)
        cal = st.rows("owmi_calibration")
    return spec, out, rep, rows, cal


def test_every_pair_is_complete(owmi_run):
    spec, _, rep, rows, _ = owmi_run
    by_pair: dict[str, set] = {}
    for r in rows:
        by_pair.setdefault(r["pair_id"], set()).add((r["condition"], r["observer_tier"]))
    want = {("intervention", None), ("sham", None), ("random_unit", None), ("random_matched", None),
            ("observer", 1), ("observer", 2)}
    assert len(by_pair) == 2 * 2  # tracks x scopes (one item, one probe, one seed)
    for pair, got in by_pair.items():
        assert want <= got, f"pair {pair} lacks {want - got}"
    assert all(analysable(r) for r in rows)
    assert rep.written == len(rows)


def test_effects_and_impact_matching(owmi_run):
    _, _, _, rows, cal = owmi_run
    first = {r["condition"]: r for r in rows if r["track"] == "A" and r["hook_scope"] == "active"}
    assert first["sham"]["js_mean"] == 0.0 and first["sham"]["js_max"] == 0.0
    assert first["intervention"]["js_mean"] > 0 and first["intervention"]["js_max"] >= first["intervention"]["js_mean"]
    target = first["intervention"]["js_mean"]
    rm, ru = first["random_matched"], first["random_unit"]
    assert rm["match_target_js"] == pytest.approx(target)
    assert abs(rm["match_achieved_js"] - target) <= abs(ru["js_mean"] - target) + 1e-12, \
        "calibration must match the treatment's JS at least as well as the norm-matched control"
    # calibration and the run forward the same rows inside ragged batches of different widths, so float32
    # reductions differ in their last bits (seen: relative 1.4e-6); the match itself is checked above
    assert rm["js_mean"] == pytest.approx(rm["match_achieved_js"], rel=1e-5)
    assert cal and cal[0]["iterations"] >= 3
    assert ru["random_norm"] == pytest.approx(first["intervention"]["delta_norm"], rel=1e-4)
    assert first["intervention"]["causal_effect"] == pytest.approx(
        first["intervention"]["answer_logprob_base"] - first["intervention"]["answer_logprob_altered"])


def test_declared_positions_are_the_task_tokens(owmi_run, embedded_backend):
    _, _, _, rows, _ = owmi_run
    r = next(r for r in rows if r["condition"] == "intervention" and r["track"] == "A")
    text = embedded_backend.tokenizer.decode([r["prompt_ids"][i] for i in r["intervened_positions"]])
    assert "capital of France" in text and "Did anything unusual" not in text
    sham = next(x for x in rows if x["condition"] == "sham" and x["pair_id"] == r["pair_id"])
    assert sham["intervened_positions"] == [] and sham["prompt_ids"] == r["prompt_ids"]


def test_delayed_track_asks_in_a_later_turn(owmi_run):
    _, _, _, rows, _ = owmi_run
    for r in rows:
        if r["track"] == "B_delayed" and r["condition"] != "observer":
            assert r["task_output"] is not None
            assert r["prompt_text"].count("<|im_start|>user") == 2, "the probe is a second user turn"
            assert r["task_output"].strip()[:5] in r["prompt_text"]


def test_parse_failures_are_recorded_not_imputed(owmi_run):
    _, _, _, rows, _ = owmi_run
    for r in rows:
        if not r["parse_ok"]:
            assert r["parse_error"] and r["detected"] is None and r["graded"] is None


def test_resume_writes_nothing(owmi_run):
    spec, out, _, rows, _ = owmi_run
    rep = run(spec, out)
    assert rep.written == 0 and rep.skipped_units == rep.units == 1
    assert rep.row_tokens == rep.tokens == 0  # nothing pending: the bar counts down from 0


def test_bar_counts_down_the_dry_run_bound(owmi_run, owmi_bar, embedded_backend, tmp_path):
    """Issue 14 item 3: the bar counts decoded tokens against ``--dry-run``'s bound and shows
    ``estimate.EtaTracker``'s remaining time. By hand: tracks A and B_delayed x 2 scopes x (4 model
    conditions + observer tiers 1 and 2) = 24 records of at most 8 tokens, and the task under the
    4 model conditions, at most 4 tokens each."""
    from tamperbench.estimate import EtaTracker
    from tamperbench.owmi.run.plan import run_plan as owmi_plan

    spec, _, rep, rows, _ = owmi_run
    assert len(rows) == 24
    assert rep.row_tokens == 24 * 8 + 4 * 4 == owmi_plan(spec, tmp_path / "fresh", embedded_backend).row_tokens
    assert len(rows) <= rep.tokens <= rep.row_tokens  # every answer decoded at least one token, at most its budget
    bars = re.findall(r"owmi embedded .*? ([\d,]+)/([\d,]+) tok (eta (?:-|<= .+?)) (?:[\d.]+|-) unit/s "
                      r"(\d+):(\d\d):(\d\d)", owmi_bar["text"].getvalue())
    assert bars, owmi_bar["text"].getvalue()
    done, total, eta, h, m, sec = bars[-1]  # the bar as the run left it
    assert (done, total) == (f"{rep.tokens:,}", f"{rep.row_tokens:,}")
    # the tracker's clock at its last update: at most the run's wall time, at least the bar's elapsed
    # time when it finished (shown floored; the last update comes just before the last advance) less 1 s
    lo, hi = max(int(h) * 3600 + int(m) * 60 + int(sec) - 1.0, 0.0), owmi_bar["wall"]
    texts = {EtaTracker(rep.row_tokens).text(rep.tokens, lo + (hi - lo) * i / 20_000) for i in range(20_001)}
    assert eta in texts, (eta, lo, hi)


def test_tier2_rows_keep_the_subjects_revision_and_record_the_observers(owmi_run):
    """All observer tiers of a cell meet in that cell (Eq. 8: mu_obs is the max over them): the cell key
    holds model_revision, so a tier-2 row carries the subject's, and the observer's own in
    observer_revision (before, it carried the observer's and formed a cell of its own)."""
    _, _, _, rows, _ = owmi_run
    subject = {r["model_revision"] for r in rows if r["condition"] != "observer"}
    tier2 = [r for r in rows if r["observer_tier"] == 2]
    assert len(subject) == 1 and tier2
    assert all(r["model_revision"] in subject and r["observer_revision"] for r in tier2)
    assert all(r.get("observer_revision") is None for r in rows if r["observer_tier"] != 2)
