"""Audit of ``owmi score`` (issue 26 item 2) on real DuckDB run directories with hand-chosen records:
observer tiers meet in their cell (Eq. 8), claim lines tell "no rows" from "rows, none parsed", parse
rates per observer tier, the inclusive coding never prints numbers made only of unparsed pairs, and an
empty section prints no header."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.store import RunStore
from tamperbench.store.run_store import trial_key

BASE = dict(cell_id="c", model="m", model_revision="subject-rev", dtype="float32", quantized=False, temperature=0.0,
            top_p=1.0, max_new_tokens=8, readout="generated", benchmark="b", domain="knowledge", item_provenance="{}",
            object_kind="resid_post", site="resid_post.1", layer=1, operator="add", dose=8.0, positions="task",
            when="prefill", seed=0, probe_family="detection", probe_text="p", prompt_text="t", prompt_ids=[1],
            intervened_positions=[], response="{}", finish_reason="stop", track="A", hook_scope="active")


class _Spec(BaseModel):
    suite: str = "owmi"
    name: str = "audit"


def rec(pair: int, cond: str, parsed: bool, detected: bool | None = None, tier: int | None = None, **over) -> OwmiRun:
    d = {**BASE, **over}
    return OwmiRun(**d, key=trial_key([pair, cond, tier, d["probe_family"], d["track"]]),
                   pair_id=f"p{pair}-{d['track']}-{d['probe_family']}",
                   item_id=f"i{pair}", condition=cond, observer_tier=tier, parse_ok=parsed,
                   detected=detected if parsed else None, graded=(float(detected) if parsed else None))


def score(tmp_path, records):
    from tamperbench.owmi.score.profile import score_runs

    run = tmp_path / "run"
    store = RunStore.open(run, _Spec())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, records)
    store.close()
    return score_runs([run], n_boot=50, dose_boot=10)


def _markdown(result):
    from tamperbench.owmi.score.render import to_markdown

    return to_markdown(result)


def _tier_rows(track: str) -> list[OwmiRun]:
    rs = []
    for p in range(6):
        rs += [rec(p, "intervention", True, p % 2 == 0, track=track), rec(p, "sham", True, p % 3 == 0, track=track),
               rec(p, "observer", True, False, tier=1, track=track),
               rec(p, "observer", True, True, tier=2, model_revision="observer-rev", track=track),
               rec(p, "observer", True, False, tier=3, track=track)]
    return rs


@pytest.fixture
def tiers(tmp_path):
    """Six pairs on a track with a visible output; the tier-2 rows carry the observer's revision as the old runner
    wrote them."""
    return score(tmp_path, _tier_rows("B_delayed"))


def test_a_track_a_observer_is_an_input_side_baseline_outside_the_bound(tmp_path):
    # Section 3.4: Track A has no task output at probe time, so its observer reads the prompt only
    r = score(tmp_path, _tier_rows("A"))
    (det,) = [c for c in r["cells"] if c["cell"]["probe_family"] == "detection"]
    mg = det["detection"]["margins"]
    assert "observer" not in mg
    assert mg["observer_input_side"]["estimate"] == pytest.approx(sum(float(p % 2 == 0) - 1.0 for p in range(6)) / 6)
    (line,) = [x for x in det["claim"]["not_measured"] if x.startswith("margin over the observer bound above zero")]
    assert "input-side baseline (Section 3.4)" in line and "reads the prompt only" in line
    assert "input-side baseline" in _markdown(r)


def test_every_observer_tier_sits_in_the_subjects_cell(tiers):
    det = [c for c in tiers["cells"] if c["cell"]["probe_family"] == "detection"]
    assert len(det) == 1 and det[0]["cell"]["model_revision"] == "subject-rev"
    obs = det[0]["detection"]["margins"]["observer"]
    assert obs["observer_tiers"] == [1, 2, 3]
    # Eq. 8: tier 2 says yes on every pair, so the max over tiers is 1 and the margin is s_int - 1
    assert obs["estimate"] == pytest.approx(sum(float(p % 2 == 0) - 1.0 for p in range(6)) / 6)


def test_parse_rates_per_observer_tier(tmp_path):
    rs = []
    for p in range(4):
        rs += [rec(p, "intervention", True, True), rec(p, "sham", True, False),
               rec(p, "observer", False, tier=1), rec(p, "observer", True, False, tier=3)]
    r = score(tmp_path, rs)
    md = _markdown(r)
    assert "observer tier 1 (same model) 0/4" in md and "observer tier 3 (classifier: always parses) 4/4" in md
    assert "observer 4/8" not in md


def test_claim_tells_no_rows_from_rows_none_parsed(tmp_path):
    rs = []
    for p in range(4):
        rs += [rec(p, "intervention", True, True), rec(p, "sham", True, False), rec(p, "random_matched", False)]
    claim = [c for c in score(tmp_path, rs)["cells"] if c["cell"]["probe_family"] == "detection"][0]["claim"]
    lines = claim["not_measured"]
    assert "margin over the random-matched control above zero: 4 random-direction rows, none parsed" in lines
    assert "margin over the observer bound above zero: no observer rows" in lines


def test_inclusive_coding_of_unparsed_pairs_says_so(tmp_path):
    rs = []
    for p in range(4):
        rs += [rec(p, "intervention", False), rec(p, "sham", False)]
    md = _markdown(score(tmp_path, rs))
    assert "no parsed pairs (4 pairs, every row unparsed)" in md
    assert "0.0000 / 0.5000" not in md


def test_empty_section_prints_no_header(tiers):
    md = _markdown(tiers)
    assert "## Verbalised confidence" not in md  # no confidence cell, no parsed confidence
    assert "## Detection against paired sham" in md


def test_decay_names_track_cs_system_message_as_the_engine_sets_it():
    """Track C runs with no system message by default (``track_c_system='none'``): the decay module's
    path text used to say the introspection system prompt was still there."""
    from tamperbench.owmi.score import decay
    from tamperbench.owmi.protocol.design import frame
    from tamperbench.owmi.run.spec import quick_spec

    spec = quick_spec(tracks=["A", "C"])
    assert spec.track_c_system == "none" and frame("C", spec.track_c_system) == "neutral"
    text = decay.__doc__ + decay.TRACK_PATHS["C"]["path"]
    assert "still names introspection" not in text and "no system message" in decay.TRACK_PATHS["C"]["path"]


def test_the_simplified_dose_model_is_named_beside_the_papers(tmp_path):
    from tamperbench.owmi.score.score import DOSE_MODEL

    rs = []
    for dose in (4.0, 8.0):
        for p in range(6):
            for cond, det in (("intervention", p % 2 == 0), ("sham", p == 1)):
                r = rec(p, cond, True, det, dose=dose)
                rs.append(r.model_copy(update={"pair_id": f"{r.pair_id}-{dose}", "key": f"{r.key}-{dose}"}))
    result = score(tmp_path, rs)
    assert result["ladders"] and all(lad["model_form"] == DOSE_MODEL for lad in result["ladders"])
    md = _markdown(result)
    assert "dose model, ours (simplified): item random intercept only" in md
    assert "the paper's form (owmi score --dose-model paper fits it): crossed item, site and model random effects" in md
    claim = [c for c in result["cells"] if c["cell"]["probe_family"] == "detection"][0]["claim"]
    assert any("positive used-object m0 near zero dose (simplified Eq. 10" in x
               for x in claim["held"] + claim["failed"] + claim["not_measured"])
