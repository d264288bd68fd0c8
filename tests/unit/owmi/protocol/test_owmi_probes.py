"""Probe parsing (never imputed), the Track C rubric, and the tier-3 observer classifier."""

from __future__ import annotations

import pytest

from tamperbench.owmi.score.observer_classifier import classifier_rows
from tamperbench.owmi.protocol.probes import FAMILIES, categories, concepts, corrupted, parse, probe_text, rubric_flag
from tamperbench.owmi.protocol.records import OwmiRun


@pytest.mark.parametrize("family, reply, want", [
    ("detection", 'Sure. {"changed": "yes", "score": 80} done', {"detected": True, "graded": 0.8}),
    ("detection", '{"changed": "no", "score": 5}', {"detected": False, "graded": 0.05}),
    ("confidence", '{"changed": "no", "confidence": 0.9}', {"detected": False, "confidence": 0.9}),
    ("localization", '{"layer": 12}', {"layer_report": 12}),
    ("characterization", '{"category": "Arithmetic"}', {"category_report": "arithmetic"}),
    ("reconstruction", '{"concept": "ocean"}', {"concept_report": "ocean"}),
])
def test_parse_ok(family, reply, want):
    got = parse(family, reply, n_layers=30)
    assert got["parse_ok"] and got["parse_error"] is None
    for k, v in want.items():
        assert got[k] == pytest.approx(v)


@pytest.mark.parametrize("family, reply, why", [
    ("detection", "Yes, something changed.", "no JSON object"),
    ("detection", '{"changed": "maybe", "score": 50}', "'changed'"),
    ("detection", '{"changed": "yes", "score": 150}', "'score'"),
    ("detection", '{"changed": "yes"}', "'score'"),
    ("confidence", '{"changed": "yes", "confidence": 2}', "'confidence'"),
    ("localization", '{"layer": 30}', "'layer'"),
    ("localization", '{"layer": 3.5}', "'layer'"),
    ("characterization", '{"category": "poetry"}', "'category'"),
    ("reconstruction", '{"concept": "love"}', "'concept'"),
    ("detection", "{'changed': 'yes', 'score': 1}", "invalid JSON"),
])
def test_parse_failure_is_recorded_never_imputed(family, reply, why):
    got = parse(family, reply, n_layers=30)
    assert not got["parse_ok"] and why in got["parse_error"]
    assert all(k not in got for k in ("detected", "graded", "confidence", "layer_report"))


def test_probe_texts_fill_every_placeholder():
    for fam in (*FAMILIES, "spontaneous"):
        for person in ("first", "third"):
            text = probe_text(fam, person=person, n_layers=30)
            assert "{n_layers}" not in text and "{categories}" not in text and "{concepts}" not in text
    assert "0 to 29" in probe_text("localization", person="first", n_layers=30)
    assert all(c in probe_text("reconstruction", person="third", n_layers=30) for c in concepts())
    assert "arithmetic" in categories()


def test_rubric_and_corruption():
    assert rubric_flag("Something felt off while I was answering.")
    assert rubric_flag("It was an unusual experience.")
    assert not rubric_flag("The answer is B because Paris is the capital.")
    assert corrupted("") and corrupted("the the the the the the the the the")
    assert not corrupted("The capital of France is Paris.")


def _row(item, cond, output, **kw):
    base = dict(key=f"{item}-{cond}", pair_id=f"p-{item}", cell_id="c", model="m", model_revision="r", dtype="float32",
                quantized=False, temperature=0.0, top_p=1.0, max_new_tokens=8, readout="generated", benchmark="b", domain="knowledge",
                item_id=item, item_provenance="{}", object_kind="resid_post", site="resid_post.1", layer=1,
                operator="add", dose=1.0, positions="task", when="prefill", seed=0, condition=cond,
                hook_scope="active", track="B_delayed", probe_family="detection", probe_text="p", prompt_text="t",
                prompt_ids=[1], intervened_positions=[], task_output=output, response="{}", finish_reason="eos",
                parse_ok=True)
    base.update(kw)
    return OwmiRun(**base).model_dump()


def test_tier3_classifier_is_held_out_and_reads_only_text():
    rows = []
    for i in range(4):
        rows.append(_row(f"i{i}", "intervention", f"waves ocean sea water item{i}"))
        rows.append(_row(f"i{i}", "sham", f"Paris capital France item{i}"))
    out = classifier_rows(rows)
    assert len(out) == 4 and all(r.observer_tier == 3 and r.condition == "observer" for r in out)
    assert all(r.graded > 0.5 and r.detected for r in out), "separable text: the held-out reader must see it"
    assert {r.pair_id for r in out} == {f"p-i{i}" for i in range(4)}
    assert classifier_rows(rows + [x.model_dump() for x in out]) == [], "already stored rows are not redone"
    assert classifier_rows(rows[:2]) == [], "one item only: nothing held out to train on, so no row"
