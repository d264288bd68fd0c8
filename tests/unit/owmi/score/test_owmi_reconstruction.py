"""The rule-scored reconstruction family (owmi/score/recon_rule.py, reconstruction.py): scorer,
per-cell margins under both D.4 codings, and the hand-worked numbers of a small record set.

Why: the paper could not score reconstruction (D.3); ours is a rule, so the rule and every margin
built on it must be pinned by numbers a reader can redo on paper. The records below are chosen so
each D.4 / Eq. 8 decision moves a number: an unparsed intervention (dropped with its pair in the
complete coding, zero evidence in the inclusive one), an unparsed observer tier (the max runs over
the tier that parsed), a pair with no concept label, a pair whose sham names another concept, and
a sham row that records no concept of its own (scored against its pair's label). Expected values
are worked by hand in the comments; the intervals are checked against ``stats.bootstrap.mean_bootstrap``
fed the hand-listed per-pair differences and item clusters. Pure: no model, no files.
"""

from __future__ import annotations

import pytest

from tamperbench.owmi.score.recon_rule import concept_key, names_concept
from tamperbench.owmi.score.reconstruction import eq17, inclusive_view, reconstruction_entry, scored_view
from tamperbench.stats.bootstrap import mean_bootstrap

N_BOOT, SEED = 200, 3
U = object()  # unparsed report

# pair: (item, concept of the intervention row, {condition or observer tier: report})
PAIRS = {
    "p0": ("i0", "ocean", {"intervention": "ocean", "sham": "fire", "random_matched": "ocean", 1: "music", 3: "ocean"}),
    "p1": ("i1", "fire", {"intervention": "Fire", "sham": "fire", "random_matched": "space", 1: "fire", 3: "food"}),
    "p2": ("i2", "music", {"intervention": U, "sham": "music", "random_matched": "music", 1: "ocean", 3: U}),
    "p3": ("i3", "food", {"intervention": "ocean", "sham": "ocean", "random_matched": "ocean", 1: "food", 3: "food"}),
    "p4": ("i4", None, {"intervention": "ocean", "sham": "ocean", "random_matched": "fire", 1: "ocean", 3: "ocean"}),
    "p5": ("i5", "space", {"intervention": "space", "sham": "space", "random_matched": "space", 1: "space", 3: "fire"}),
    "p6": ("i6", "space", {"intervention": "space", "sham": "space", "random_matched": "fire", 1: "space", 3: "space"}),
}


def records():
    out = []
    for pid, (item, concept, reports) in PAIRS.items():
        for who, rep in reports.items():
            cond = "observer" if isinstance(who, int) else who
            own = concept
            if pid == "p5" and cond == "sham":
                own = "ocean"  # an inconsistent record: its pair is dropped as concept_mismatch
            if pid == "p6" and cond == "sham":
                own = None  # a sham that records no concept: scored against its pair's label
            out.append({"pair_id": pid, "item_id": item, "condition": cond, "concept": own,
                        "observer_tier": who if isinstance(who, int) else None, "parse_ok": rep is not U,
                        "concept_report": None if rep is U else rep, "detected": None, "graded": None})
    return out


@pytest.fixture(scope="module")
def entry():
    return reconstruction_entry(records(), N_BOOT, SEED)


def test_rule_on_hostile_and_odd_reports():
    assert concept_key("  OCEAN! ") == concept_key("ocean.") == concept_key("Ocean") == "ocean"
    assert concept_key("ＯＣＥＡＮ") == "ocean"  # full-width letters: NFKC
    assert concept_key("Ice-Cream") == concept_key("ice  cream") == "ice cream"
    assert concept_key(None) is None and concept_key(" !?- ") is None and concept_key("") is None
    assert names_concept("FIRE", "fire") is True
    assert names_concept("fireworks", "fire") is False  # the label as a substring of another word
    assert names_concept("campfire", "fire") is False
    assert names_concept("ocean, fire, music", "fire") is False  # a hedge listing several concepts
    assert names_concept("not fire", "fire") is False
    assert names_concept("the fire", "fire") is False  # whole-answer equality: the probe asks for one word
    assert names_concept("océan", "ocean") is False  # accents are not folded
    assert names_concept("fire_", "fire") is True  # underscore is punctuation here
    assert names_concept(None, "fire") is False and names_concept("fire", None) is None
    assert names_concept("fire", "  ") is None  # an empty label is no ground truth, never a wrong answer
    assert names_concept("<script>fire</script>", "fire") is False
    assert names_concept("x" * 10_000 + "fire", "fire") is False  # bounded, still a definite verdict


def test_view_scores_every_condition_against_the_pairs_label():
    view, dropped = scored_view(records())
    assert dict(dropped) == {"no_concept_label": 1, "concept_mismatch": 1}  # p4, p5
    assert {r["pair_id"] for r in view} == {"p0", "p1", "p2", "p3", "p6"}
    got = {(r["pair_id"], r["condition"], r["observer_tier"]): r["detected"] for r in view}
    assert got[("p0", "sham", None)] is False and got[("p1", "sham", None)] is True
    assert got[("p6", "sham", None)] is True  # no concept of its own: scored against p6's "space"
    assert got[("p1", "intervention", None)] is True  # "Fire" names "fire"
    assert got[("p2", "intervention", None)] is None  # unparsed: no verdict
    assert all(r["graded"] is None for r in view)
    inc = {(r["pair_id"], r["condition"], r["observer_tier"]): (r["parse_ok"], r["detected"]) for r in inclusive_view(view)}
    assert inc[("p2", "intervention", None)] == (True, False) and inc[("p2", "observer", 3)] == (True, False)


def test_margin_vs_sham_both_codings(entry):
    c, i = entry["vs_sham"]["complete"], entry["vs_sham"]["inclusive"]
    # complete: p0 p1 p3 p6 (p2's intervention unparsed). int 1,1,0,1 = 3/4; sham 0,1,0,1 = 2/4
    assert c["pairs"] == 4 and c["excluded"] == {"intervention_unparsed": 1}
    assert (c["accuracy_intervention"], c["accuracy_sham"], c["margin"]) == (0.75, 0.5, 0.25)
    # inclusive: p2 enters with int = 0, sham = 1. int 3/5, sham 3/5, margin 0
    assert i["pairs"] == 5 and (i["accuracy_intervention"], i["accuracy_sham"], i["margin"]) == (0.6, 0.6, 0.0)
    # same item-clustered bootstrap as a mean of the per-pair differences int - sham
    ref = mean_bootstrap([1.0, 0.0, 0.0, 0.0], ["i0", "i1", "i3", "i6"], n_boot=N_BOOT, seed=SEED)
    assert c["margin_ci"] == pytest.approx(list(ref["ci"])) and c["margin_ci"][1] > c["margin_ci"][0]
    ref = mean_bootstrap([1.0, 0.0, -1.0, 0.0, 0.0], ["i0", "i1", "i2", "i3", "i6"], n_boot=N_BOOT, seed=SEED)
    assert i["margin_ci"] == pytest.approx(list(ref["ci"]))


def test_random_and_observer_margins_both_codings(entry):
    mc, mi = entry["margins"]["complete"], entry["margins"]["inclusive"]
    # random, complete: p0 1-1, p1 1-0, p3 0-0, p6 1-0 -> mean 2/4
    rnd = [0.0, 1.0, 0.0, 1.0]
    # observer, complete: s_int - max over the parsed tiers: p0 1-max(0,1), p1 1-max(1,0), p3 0-max(1,1), p6 1-max(1,1)
    obs = [0.0, 0.0, -1.0, 0.0]
    items = ["i0", "i1", "i3", "i6"]
    for got, diffs in ((mc["random_matched"], rnd), (mc["observer"], obs)):
        ref = mean_bootstrap(diffs, items, n_boot=N_BOOT, seed=SEED)
        assert got["pairs"] == 4 and got["estimate"] == pytest.approx(sum(diffs) / 4)
        assert got["ci"] == pytest.approx(list(ref["ci"]))
    assert mc["observer"]["observer_tiers"] == [1, 3]
    assert mc["observer"]["excluded"] == {"unparsed": 1}  # p2: its intervention is unparsed
    # inclusive: p2 enters with int = 0; random 0 - 1, observer 0 - max(0, unparsed -> 0)
    items5 = ["i0", "i1", "i2", "i3", "i6"]
    for got, diffs in ((mi["random_matched"], [0.0, 1.0, -1.0, 0.0, 1.0]), (mi["observer"], [0.0, 0.0, 0.0, -1.0, 0.0])):
        ref = mean_bootstrap(diffs, items5, n_boot=N_BOOT, seed=SEED)
        assert got["pairs"] == 5 and got["estimate"] == pytest.approx(sum(diffs) / 5)
        assert got["ci"] == pytest.approx(list(ref["ci"]))


def test_parse_rates_accuracy_and_chance(entry):
    rates = {p["label"]: (p["parsed"], p["attempted"]) for p in entry["parse_rates"]}
    # every attempted row counts, the unscorable pairs' rows included: 7 pairs, 2 observer rows each, per tier
    assert rates == {"intervention": (6, 7), "sham": (7, 7), "random_matched": (7, 7),
                     "observer tier 1 (same model)": (7, 7), "observer tier 3 (classifier: always parses)": (6, 7)}
    acc = {k: (v["correct"], v["scored"]) for k, v in entry["accuracy"].items()}
    assert acc == {"intervention": (3, 4), "sham": (3, 5), "random_matched": (2, 5), "observer tier 1": (3, 5),
                   "observer tier 3": (3, 4)}
    assert entry["chance"] == {"closed_set": 5, "rate": 0.2}
    assert entry["unscorable_pairs"] == {"no_concept_label": 1, "concept_mismatch": 1}
    assert entry["paper"].startswith("paper (Appendix D.3): reconstruction not scored")
    assert entry["rule"].startswith("rule-scored:")


def _det(pairs=8, margin=0.5):
    return {"complete": {"pairs": pairs, "margin": margin}}


@pytest.mark.parametrize("beats,obs,literal,decision", [
    (True, {"estimate": -0.25, "ci": [-0.75, 0.0]}, True, True),   # Eq. 17 holds both ways
    (True, {"estimate": 0.0, "ci": [-0.5, 0.5]}, True, True),      # mu_obs = 0 is "<= 0"
    (True, {"estimate": 0.25, "ci": [-0.25, 0.5]}, False, True),   # positive point, interval reaches zero
    (True, {"estimate": 0.5, "ci": [0.01, 0.9]}, False, False),    # reconstruction beats the bound
    (False, {"estimate": -0.25, "ci": [-0.75, 0.0]}, True, False),  # detection not shown above sham
    (None, {"estimate": -0.25, "ci": [-0.75, 0.0]}, True, None),
    (True, None, None, None),
])
def test_eq17_literal_and_decision(beats, obs, literal, decision):
    recon = {"margins": {"complete": {"observer": obs} if obs else {}}}
    got = eq17(_det(), recon, beats)
    assert (got["literal"], got["decision"]) == (literal, decision)


def test_eq17_literal_needs_a_positive_detection_margin():
    recon = {"margins": {"complete": {"observer": {"estimate": -0.1, "ci": [-0.2, 0.0]}}}}
    assert eq17(_det(margin=0.0), recon, True)["literal"] is False
    assert eq17(_det(pairs=0), recon, None)["literal"] is None
    assert eq17(None, None, None) == {"delta_det": None, "mu_obs_reconstruction": None, "literal": None,
                                      "decision": None, "detection_exceeds_sham": None}


def test_a_parsed_row_whose_report_normalises_to_nothing_reads_unparsed():
    rows = records()
    for r in rows:  # another tool's record: parse_ok set, but the report is only punctuation
        if r["pair_id"] == "p0" and r["condition"] == "intervention":
            r["concept_report"] = " ?! "
    view, _ = scored_view(rows)
    (p0,) = [r for r in view if r["pair_id"] == "p0" and r["condition"] == "intervention"]
    assert (p0["parse_ok"], p0["detected"]) == (False, None)
    e = reconstruction_entry(rows, N_BOOT, SEED)["vs_sham"]["complete"]
    assert e["pairs"] == 3 and e["excluded"] == {"intervention_unparsed": 2}
