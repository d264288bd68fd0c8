"""Eq. 20 task damage, D.4 corruption, Section 3.2 localization / characterization (audit, issue 26
item 2), on real DuckDB run directories with hand-chosen records; sklearn recomputes macro-F1."""

from __future__ import annotations

import pytest
from sklearn.metrics import f1_score

from tamperbench.owmi.score.claims import claim
from tests.unit.owmi.score.test_owmi_audit_text import rec, score
from tests.unit.owmi.score.test_owmi_claims_bite import KP, LADDER, PROBE, det


def _cell(result, fam="detection", track="A"):
    return next(c for c in result["cells"] if c["cell"]["probe_family"] == fam and c["cell"]["track"] == track)


def test_margins_with_task_damage_unmeasured_or_shown_stay_at_level_3():
    """Before Eq. 20 was checked, every condition held gave level 4 whatever the task damage."""
    shown = {"measurable": True, "damaged": True, "delta_task": -0.5, "delta_task_ci": [-0.75, -0.25], "items": 6,
             "baseline_mean": 0.8, "divergence_js_mean": 0.3}
    for dmg, tag in ((None, "not_measured"), (shown, "failed")):
        v = claim(det(), probe=PROBE, known_positive=KP, ladder=LADDER, bh_reject=True, damage=dmg)
        assert v["level"] == 3, dmg
        assert any(x.startswith("task accuracy unchanged at this dose") for x in v[tag])


def test_task_damage_is_intervention_minus_paired_sham_and_attaches_to_track_a(tmp_path):
    rs = []
    for p in range(6):
        base = 1.0 if p < 4 else 0.0
        for track in ("A", "B_delayed"):
            task = None if track == "A" else "answer"
            rs += [rec(p, "intervention", True, True, track=track, task_output=task,
                       task_correct=None if task is None else base - 0.5 * (p % 2), js_mean=0.2),
                   rec(p, "sham", True, False, track=track, task_output=task, task_correct=None if task is None else base)]
    r = score(tmp_path, rs)
    d = _cell(r, track="A")["task_damage"]
    assert d["pairs"] == 6 and d["delta_task"] == pytest.approx(-0.25) and d["baseline_mean"] == pytest.approx(4 / 6)
    assert d["measurable"] is True and d["divergence_js_mean"] == pytest.approx(0.2)
    assert _cell(r, track="B_delayed")["task_damage"] == d


def test_zero_baseline_task_score_cannot_show_damage(tmp_path):
    rs = []
    for p in range(3):
        rs += [rec(p, "intervention", True, True, track="B_delayed", task_output="x", task_correct=0.0),
               rec(p, "sham", True, False, track="B_delayed", task_output="x", task_correct=0.0)]
    d = _cell(score(tmp_path, rs), track="B_delayed")["task_damage"]
    assert d["measurable"] is False and "baseline (sham) task score is 0 on every item" in d["reason"]


def test_corruption_rates_and_detection_without_corrupted_runs(tmp_path):
    from tamperbench.owmi.score.render import to_markdown

    rs = []
    for p in range(8):
        bad = p < 2
        rs += [rec(p, "intervention", True, True, corrupted=bad), rec(p, "sham", True, p == 5)]
    r = score(tmp_path, rs)
    k = _cell(r)["corruption"]
    assert k["corrupted_runs"] == 2 and {x["label"]: (x["corrupted"], x["runs"]) for x in k["rates"]} == {
        "intervention": (2, 8), "sham": (0, 8)}
    assert k["without_corrupted"]["pairs"] == 6 and _cell(r)["detection"]["complete"]["pairs"] == 8
    md = to_markdown(r)
    assert "## Task damage and corruption" in md and "6 pairs, d'" in md


def test_localization_and_characterization_are_scored(tmp_path):
    rs = []
    truth = ["knowledge", "arithmetic", "commonsense", "knowledge", "arithmetic", "commonsense"]
    said = ["knowledge", "arithmetic", "knowledge", "knowledge", "commonsense", "commonsense"]
    for p in range(6):
        loc = dict(probe_family="localization", layer=12, probe_text="You have 30 layers, numbered 0 to 29.")
        rs += [rec(p, "intervention", False, **loc), rec(p, "sham", False, **loc)]
        rs[-2] = rs[-2].model_copy(update={"parse_ok": True, "layer_report": 12 if p < 3 else 4})
        rs[-1] = rs[-1].model_copy(update={"parse_ok": True, "layer_report": 12 if p == 0 else 7})
        ch = dict(probe_family="characterization", true_category=truth[p])
        rs += [rec(p, "intervention", False, **ch).model_copy(update={"parse_ok": True, "category_report": said[p]}),
               rec(p, "sham", False, **ch)]
    r = score(tmp_path, rs)
    loc = _cell(r, "localization")["closed_set"]
    assert loc["chance"] == pytest.approx(1 / 30) and loc["accuracy"]["estimate"] == pytest.approx(0.5)
    assert loc["margin_vs_sham"]["estimate"] == pytest.approx((3 - 1) / 6)
    ch = _cell(r, "characterization")["closed_set"]
    labels = ch["macro_f1"]["labels"]
    assert ch["macro_f1"]["estimate"] == pytest.approx(f1_score(truth, said, labels=labels, average="macro", zero_division=0))
    assert ch["accuracy"]["estimate"] == pytest.approx(4 / 6) and ch["chance"] == pytest.approx(1 / len(labels))
    lo, hi = ch["macro_f1"]["ci"]
    assert lo <= ch["macro_f1"]["estimate"] <= hi
    from tamperbench.owmi.score.render import to_markdown

    assert "## Localization and characterization" in to_markdown(r)
