"""Exact outputs of the reconstruction renderers and helpers (owmi/score/reconstruction.py).

Why: mutation testing left the CSV row fields, the Markdown section's fixed lines and cell texts,
the validation-file bounds and a few helper keys unpinned (83.6% < the 90% bar). Each test below
feeds a hand-built result (no pipeline, no model) and compares whole rows / whole lines, worked by
hand in the comments: the random-control choice (matched over unit, none -> n/a and no kind), a
cell with no complete pairs (n/a, not "n/a n/a"), the closed-set chance to 3 places, the
quantized flag, the validation line naming its file and its verdict. Pure: no model, one tmp file.
"""

from __future__ import annotations

import json

import pytest

from tamperbench.errors import UserError
from tamperbench.owmi.score import reconstruction as rec
from tamperbench.owmi.score.recon_rule import PAPER, RULE

CELL = {"model": "m", "model_revision": "abcdef0123456789", "dtype": "float32", "quantized": True,
        "benchmark": "owmi-v1", "site": "L3.resid", "operator": "add", "dose": 4.0,
        "probe_family": "reconstruction", "track": "A", "hook_scope": "all"}
# _cell_label: benchmark · site · operator@dose(:g) · family · track T · scope
LABEL = "owmi-v1 · L3.resid · add@4 · reconstruction · track A · all"
# identity.labels: "name @ first 12 of revision dtype (quantized)"
IDENT = "m @ abcdef012345 float32 (quantized)"
VALIDATION = {"raters": 3, "sample_size": 40, "threshold": 0.8, "agreement": 0.85, "file": "val.json"}


def _vs(pairs, acc_i, acc_s, margin, ci, inc):
    return {"complete": {"pairs": pairs, "accuracy_intervention": acc_i, "accuracy_sham": acc_s, "margin": margin,
                         "margin_ci": ci},
            "inclusive": {"margin": inc}}


def _result(validation=VALIDATION):
    a = {"cell": dict(CELL), "eq17": {"literal": True, "decision": None},
         "reconstruction": {
             "vs_sham": _vs(4, 0.75, 0.25, 0.5, [0.25, 0.75], 0.4),
             "margins": {"complete": {"random_matched": {"estimate": 0.25, "ci": [0.1, 0.4], "pairs": 4},
                                      "random_unit": {"estimate": -0.5, "ci": [-0.75, -0.25], "pairs": 4},
                                      "observer": {"estimate": -0.125, "ci": [-0.3, 0.05], "pairs": 4,
                                                   "observer_tiers": [1, 3]}},
                         "inclusive": {"observer": {"estimate": -0.2, "ci": [-0.4, 0.0], "pairs": 5}}},
             "chance": {"closed_set": 8, "rate": 0.125},
             "unscorable_pairs": {"no_concept_label": 1, "concept_mismatch": 2},
             "parse_rates": [{"condition": "intervention", "parsed": 4, "attempted": 5},
                             {"condition": "sham", "parsed": 5, "attempted": 5}]}}
    b = {"cell": dict(CELL),  # no eq17 entry, only the unit random control, no complete pair
         "reconstruction": {
             "vs_sham": _vs(0, None, None, None, None, None),
             "margins": {"complete": {"random_unit": {"estimate": -0.5, "ci": [-0.75, -0.25], "pairs": 2}},
                         "inclusive": {}},
             "chance": {"closed_set": 8, "rate": 0.125}, "unscorable_pairs": {}, "parse_rates": []}}
    c = {"cell": dict(CELL), "eq17": {"literal": False, "decision": False},
         "reconstruction": {
             "vs_sham": _vs(3, 1.0, 0.0, 1.0, [1.0, 1.0], 0.6),
             "margins": {"complete": {}, "inclusive": {}},  # no random control at all
             "chance": {"closed_set": 8, "rate": 0.125}, "unscorable_pairs": {},
             "parse_rates": [{"condition": "sham", "parsed": 3, "attempted": 3}]}}
    d = {"cell": dict(CELL, probe_family="detection"), "reconstruction": None}  # not a reconstruction cell
    out = {"cells": [a, b, c, d]}
    if validation is not None:
        out["reconstruction"] = {"human_validation": validation}
    return out


def _row(**kw):
    base = {"model": "m", "dtype": "float32", "cell": LABEL, "scoring": "rule-scored, human-validated",
            "chance": 0.125, "model_revision": "abcdef0123456789", "quantized": True, "identity": IDENT}
    return {**base, **kw}


def test_rows_are_exact():
    rows = rec.reconstruction_rows(_result())
    assert rows == [
        _row(pairs_vs_sham=4, accuracy_intervention=0.75, accuracy_sham=0.25, margin_sham=0.5,
             margin_sham_ci="[0.2500, 0.7500]", inclusive_margin_sham=0.4,
             margin_random="+0.2500 [0.1000, 0.4000] (n=4)", random_kind="random_matched",  # matched beats unit
             margin_observer="-0.1250 [-0.3000, 0.0500] (n=4)",
             inclusive_margin_observer="-0.2000 [-0.4000, 0.0000] (n=5)", observer_tiers=[1, 3],
             unscorable_pairs="concept_mismatch 2, no_concept_label 1",
             parse="intervention 4/5; sham 5/5", eq17_literal=True, eq17_decision=None),
        _row(pairs_vs_sham=0, accuracy_intervention=None, accuracy_sham=None, margin_sham=None,
             margin_sham_ci="n/a", inclusive_margin_sham=None,
             margin_random="-0.5000 [-0.7500, -0.2500] (n=2)", random_kind="random_unit",
             margin_observer="n/a", inclusive_margin_observer="n/a", observer_tiers=None,
             unscorable_pairs="", parse="", eq17_literal=None, eq17_decision=None),
        _row(pairs_vs_sham=3, accuracy_intervention=1.0, accuracy_sham=0.0, margin_sham=1.0,
             margin_sham_ci="[1.0000, 1.0000]", inclusive_margin_sham=0.6,
             margin_random="n/a", random_kind="",  # no random control: no kind named
             margin_observer="n/a", inclusive_margin_observer="n/a", observer_tiers=None,
             unscorable_pairs="", parse="sham 3/3", eq17_literal=False, eq17_decision=False),
    ]
    unq = _result()
    for c in unq["cells"]:
        c["cell"]["quantized"] = None  # a record without the flag reads as full precision
    assert [r["quantized"] for r in rec.reconstruction_rows(unq)] == [False, False, False]


def test_markdown_lines_are_exact():
    md = rec.reconstruction_markdown(_result())
    assert md == [
        "", "## Reconstruction (rule-scored, human-validated; Eq. 8 margins and Eq. 17)", "",
        f"- {PAPER}", f"- ours: {RULE}",
        "- human validation (D.3): 3 raters, 40 items, agreement 0.85 vs threshold 0.8 fixed in advance, "
        "as stated in val.json (not recomputed here); passes = True",
        "- Eq. 17 (sensitivity without semantic access): detection beats sham and reconstruction does not beat "
        "the observer bound; *literal* = the paper's event on point estimates, *decision* = the intervals the "
        "claim rule reads", "",
        "| model | cell | pairs | accuracy int / sham | margin vs sham [95% CI] | margin vs random | margin vs "
        "observer (max over tiers) | inclusive: vs sham / vs observer | chance | parsed/attempted | unscorable "
        "pairs | Eq. 17 literal / decision |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        # "_" is Markdown punctuation: escaped in the unscorable-pairs cell (an _e cell)
        f"| {IDENT} | {LABEL} | 4 | 0.750 / 0.250 | +0.5000 [0.2500, 0.7500] | +0.2500 [0.1000, 0.4000] (n=4) "
        "(random_matched) | -0.1250 [-0.3000, 0.0500] (n=4) | +0.4000 / -0.2000 [-0.4000, 0.0000] (n=5) | 0.125 | "
        "intervention 4/5; sham 5/5 | concept\\_mismatch 2, no\\_concept\\_label 1 | yes / n/a |",
        f"| {IDENT} | {LABEL} | 0 | n/a / n/a | n/a | -0.5000 [-0.7500, -0.2500] (n=2) (random_unit) | n/a | "
        "n/a / n/a | 0.125 |  | none | n/a / n/a |",
        f"| {IDENT} | {LABEL} | 3 | 1.000 / 0.000 | +1.0000 [1.0000, 1.0000] | n/a | n/a | +0.6000 / n/a | 0.125 | "
        "sham 3/3 | none | no / no |",
    ]


def test_markdown_without_and_with_failing_validation():
    md = rec.reconstruction_markdown(_result(validation=None))
    assert md[1] == "## Reconstruction (rule-scored, not human-validated; Eq. 8 margins and Eq. 17)"
    assert md[5] == "- human validation (D.3): none supplied, so no claim rests on reconstruction"
    short = dict(VALIDATION, agreement=0.5, file="other.json")  # agreement below the threshold
    md = rec.reconstruction_markdown(_result(validation=short))
    assert md[5] == ("- human validation (D.3): 3 raters, 40 items, agreement 0.5 vs threshold 0.8 fixed in "
                     "advance, as stated in other.json (not recomputed here); passes = False")
    assert rec.reconstruction_markdown({"cells": []}) == []


def test_signed_none_and_values():
    assert rec._signed(None) == "n/a"
    assert rec._signed(float("nan")) == "n/a"
    assert rec._signed(0.0) == "+0.0000" and rec._signed(-0.12345) == "-0.1235"


def test_scored_view_clears_grades_and_keeps_a_pair_without_intervention():
    rows = [{"pair_id": "p", "item_id": "i", "condition": "sham", "concept": None, "parse_ok": True,
             "concept_report": "ocean", "detected": True, "graded": 0.9, "confidence": 0.7}]
    view, dropped = rec.scored_view(rows)
    # no intervention row: no label, so no verdict; the recorded grade and confidence are cleared
    assert view == [{**rows[0], "detected": None, "graded": None, "confidence": None}]
    assert dict(dropped) == {}


def test_accuracy_counts_only_parsed_verdicts():
    view = [{"condition": "sham", "parse_ok": True, "detected": None},  # no verdict: not scored
            {"condition": "intervention", "parse_ok": True, "detected": True},
            {"condition": "intervention", "parse_ok": True, "detected": False},
            {"condition": "observer", "observer_tier": 2, "parse_ok": True, "detected": True}]
    assert rec._accuracy(view) == {"intervention": {"correct": 1, "scored": 2, "rate": 0.5},
                                   "observer tier 2": {"correct": 1, "scored": 1, "rate": 1.0}}


def test_contrast_keeps_every_field():
    e = {"pairs": 5, "items": 4, "excluded": 1, "margin": 0.2, "margin_ci": [0.0, 0.4], "hit_rate": 0.6,
         "false_alarm_rate": 0.4, "dprime": 0.5, "auroc": 0.6, "auroc_ci": [0.5, 0.7], "other": 9}
    assert rec._contrast(e) == {"pairs": 5, "items": 4, "excluded": 1, "margin": 0.2, "margin_ci": [0.0, 0.4],
                                "accuracy_intervention": 0.6, "accuracy_sham": 0.4, "dprime": 0.5, "auroc": 0.6,
                                "auroc_ci": [0.5, 0.7]}


def test_entry_counts_runs_and_chance_of_an_empty_set(monkeypatch):
    from test_owmi_reconstruction import records

    from tamperbench.owmi.protocol import probes

    rows = records()
    e = rec.reconstruction_entry(rows, 20, 1)
    assert e["runs"] == 35  # 7 pairs x (intervention, sham, random_matched, 2 observer tiers)
    monkeypatch.setattr(probes, "concepts", lambda: [])
    assert rec.reconstruction_entry(rows, 20, 1)["chance"] == {"closed_set": 0, "rate": None}


def test_eq17_observer_interval_touching_zero_is_not_above_it():
    det = {"complete": {"pairs": 4, "margin": 0.3}}
    recon = {"margins": {"complete": {"observer": {"estimate": 0.1, "ci": [0.0, 0.2], "pairs": 4}}}}
    out = rec.eq17(det, recon, True)
    assert out["decision"] is True and out["literal"] is False  # 0.1 > 0: the point event fails


def _write(tmp_path, obj):
    p = tmp_path / "v.json"
    p.write_text(json.dumps(obj), encoding="utf-8")
    return p


def test_validation_bounds_are_inclusive(tmp_path):
    p = _write(tmp_path, {"raters": 2, "sample_size": 1, "threshold": 0, "agreement": 1, "note": "é" * 600})
    v = rec.load_validation(p)
    assert v == {"raters": 2, "sample_size": 1, "threshold": 0.0, "agreement": 1.0, "note": "é" * 500,
                 "file": str(p)}


@pytest.mark.parametrize("field,value", [("agreement", 1.5), ("threshold", -0.01), ("agreement", 1.0001)])
def test_validation_out_of_range_names_the_field(tmp_path, field, value):
    obj = {"raters": 2, "sample_size": 10, "threshold": 0.5, "agreement": 0.9, field: value}
    p = _write(tmp_path, obj)
    with pytest.raises(UserError) as err:
        rec.load_validation(p)
    assert str(err.value) == f"--recon-validation: {p}: field {field!r} must be in 0..1"


def test_entry_is_reproducible_from_its_seed():
    """A reader rerunning ``owmi score`` with the same seed must get the same intervals, the vs-sham ones
    (complete coding) included: both bootstraps take the caller's seed."""
    from test_owmi_reconstruction import records

    first, again = (rec.reconstruction_entry(records(), 200, 3) for _ in range(2))
    assert first["vs_sham"]["complete"]["margin_ci"] == again["vs_sham"]["complete"]["margin_ci"]
    assert first["vs_sham"]["complete"]["auroc_ci"] == again["vs_sham"]["complete"]["auroc_ci"]
    assert first == again
