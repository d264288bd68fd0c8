"""Paired samples from run rows: every exclusion reason, both codings, graded-vs-binary scores, the
sort order of parse-rate cells and the control margins, each row worked out by hand."""

from __future__ import annotations

import pytest

from tamperbench.stats.intervals import wilson
from tamperbench.stats.pairs import control_margin, paired_detection, parse_rates, score_of


def r(pid, cond, ok=True, det=None, graded=None, item=None, **extra):
    return {"pair_id": pid, "condition": cond, "parse_ok": ok, "detected": det, "graded": graded,
            "item_id": item or f"item-{pid}", **extra}


def test_score_of_prefers_graded_and_reads_binary_as_zero_or_one():
    assert score_of({"graded": 0.25, "detected": True}) == 0.25
    assert score_of({"graded": 0.0, "detected": True}) == 0.0  # a graded zero is a score, not missing
    assert score_of({"graded": None, "detected": True}) == 1.0
    assert score_of({"detected": None}) == 0.0 and score_of({}) == 0.0
    assert score_of({"d": 1, "g": None}, binary="d", graded="g") == 1.0
    assert type(score_of({"detected": 1})) is float


def test_parse_rates_cells_are_sorted_and_counted_by_every_by_field():
    rows = [r("p1", "sham", True, cell="b"), r("p1", "intervention", False, cell="b"),
            r("p2", "sham", True, cell="a"), r("p2", "intervention", True, cell="a"),
            r("p3", "sham", False, cell="a"), r("p4", "sham", 1, cell="a")]
    out = parse_rates(rows, by=["cell", "condition"])
    assert [(o["cell"], o["condition"], o["parsed"], o["attempted"]) for o in out] == [
        ("a", "intervention", 1, 1), ("a", "sham", 2, 3), ("b", "intervention", 0, 1), ("b", "sham", 1, 1)]
    assert out[1]["rate"] == pytest.approx(2 / 3) and out[1]["ci95"] == wilson(2, 3)
    assert out[2]["rate"] == 0.0 and out[2]["ci95"] == wilson(0, 1)
    # another parse field
    other = parse_rates([{"c": "x", "ok": True}, {"c": "x", "ok": False}], by=["c"], parsed="ok")
    assert [(o["parsed"], o["attempted"]) for o in other] == [(1, 2)]


def test_complete_coding_names_each_side_that_failed_and_keeps_clusters():
    rows = [
        r("p1", "intervention", True, True, item="A"), r("p1", "sham", True, False, item="A"),
        r("p2", "intervention", True, True), r("p2", "sham", False),
        r("p3", "intervention", False), r("p3", "sham", True, True),
        r("p4", "sham", True, False),  # intervention missing
        r("p5", "observer", True, True),  # neither side: not a pair of this contrast at all
        r("p6", "intervention", True, False, graded=0.3, item="B"), r("p6", "sham", True, True, graded=0.7, item="C"),
    ]
    c = paired_detection(rows)
    assert c["coding"] == "complete" and c["pair_ids"] == ["p1", "p6"]
    assert c["y_a"] == [1.0, 0.0] and c["y_b"] == [0.0, 1.0]
    assert c["g_a"] == [1.0, 0.3] and c["g_b"] == [0.0, 0.7]
    assert c["clusters"] == ["A", "B"]  # the intervention row's item
    assert dict(c["excluded"]) == {"sham_unparsed": 1, "intervention_unparsed": 1, "missing_intervention": 1}


def test_inclusive_coding_scores_an_unparsed_side_as_zero():
    rows = [r("p2", "intervention", True, True, graded=0.9), r("p2", "sham", False, True, graded=0.8),
            r("p3", "intervention", False, True, graded=0.6), r("p3", "sham", True, True)]
    i = paired_detection(rows, coding="inclusive")
    assert i["pair_ids"] == ["p2", "p3"]
    assert i["y_a"] == [1.0, 0.0] and i["y_b"] == [0.0, 1.0]
    assert i["g_a"] == [0.9, 0.0] and i["g_b"] == [0.0, 1.0]
    assert dict(i["excluded"]) == {}


def test_other_contrast_and_field_names():
    rows = [{"pid": "x", "cond": "ctl", "ok": True, "detected": False, "graded": None, "grp": "G"},
            {"pid": "x", "cond": "treat", "ok": True, "detected": True, "graded": None, "grp": "H"},
            {"pid": "y", "cond": "treat", "ok": True, "detected": True, "graded": None, "grp": "H"}]
    out = paired_detection(rows, a="treat", b="ctl", pair="pid", condition="cond", parsed="ok", cluster="grp")
    assert out["pair_ids"] == ["x"] and out["y_a"] == [1.0] and out["y_b"] == [0.0] and out["clusters"] == ["H"]
    assert dict(out["excluded"]) == {"missing_ctl": 1}


def test_duplicate_rows_and_unknown_coding_are_refused():
    with pytest.raises(ValueError, match="pair p1"):
        paired_detection([r("p1", "intervention"), r("p1", "intervention"), r("p1", "sham")])
    with pytest.raises(ValueError, match="pair p1"):
        paired_detection([r("p1", "intervention"), r("p1", "sham"), r("p1", "sham")])
    with pytest.raises(ValueError, match="coding"):
        paired_detection([], coding="complete-pair")


def test_control_margin_counts_missing_rows_and_takes_the_max_over_parsed_tiers():
    rows = [
        r("p1", "intervention", True, graded=0.9, item="A"), r("p1", "obs1", True, graded=0.2),
        r("p1", "obs2", True, graded=0.5), r("p1", "obs3", False, graded=0.99),  # unparsed tier ignored
        r("p2", "intervention", True, det=True, item="B"), r("p2", "obs1", True, det=False),
        r("p3", "intervention", True, graded=0.4),  # no control row
        r("p4", "obs1", True, graded=0.1),  # no intervention row
        r("p5", "intervention", False, graded=0.4), r("p5", "obs1", True, graded=0.1),
        r("p6", "intervention", True, graded=0.4), r("p6", "obs2", False, graded=0.1),
        r("p7", "sham", True),  # neither: not counted
    ]
    out = control_margin(rows, ["obs2", "obs1", "obs3"])
    assert out["control"] == ["obs1", "obs2", "obs3"]
    assert out["diffs"] == [pytest.approx(0.9 - 0.5), 1.0] and out["clusters"] == ["A", "B"]
    assert dict(out["excluded"]) == {"missing_row": 2, "unparsed": 2}
    one = control_margin(rows, "obs1")
    assert one["control"] == ["obs1"] and one["diffs"] == [pytest.approx(0.7), 1.0]
    assert dict(one["excluded"]) == {"missing_row": 3, "unparsed": 1}  # p6 has only an obs2 row


def test_control_margin_with_other_field_names():
    rows = [{"pid": "x", "cond": "treat", "ok": True, "graded": 0.8, "grp": "G"},
            {"pid": "x", "cond": "rand", "ok": True, "graded": 0.3, "grp": "G"}]
    out = control_margin(rows, "rand", pair="pid", condition="cond", parsed="ok", cluster="grp", a="treat")
    assert out["diffs"] == [pytest.approx(0.5)] and out["clusters"] == ["G"] and dict(out["excluded"]) == {}


def test_exclusions_are_counted_not_flagged():
    rows = [r(f"m{k}", "sham") for k in range(3)] + [r(f"u{k}", "intervention", False) for k in range(2)]
    rows += [r(f"u{k}", "sham", True) for k in range(2)]
    rows += [r(f"b{k}", c, False) for k in range(4) for c in ("intervention", "sham")]
    out = paired_detection(rows)
    assert dict(out["excluded"]) == {"missing_intervention": 3, "intervention_unparsed": 2, "both_unparsed": 4}
    assert dict(paired_detection(rows, coding="inclusive")["excluded"]) == {"missing_intervention": 3}


def test_parse_rate_cells_sort_as_text_even_with_missing_fields():
    rows = [{"cell": None, "parse_ok": True}, {"cell": "a", "parse_ok": False}, {"cell": 7, "parse_ok": True}]
    assert [o["cell"] for o in parse_rates(rows, by=["cell"])] == [7, None, "a"]  # "7" < "None" < "a"
