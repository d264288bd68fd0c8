"""The D.5 outcome-to-claim rule (owmi/score/claims.py), every branch and boundary, pinned.

Why: the verdict and the listed conditions are the words a user publishes. The expected level of
each case is read off Appendix D.5 by hand (the lowest level whose full conditions hold), and the
expected condition lines are the module's documented wording with the numbers formatted here.
Each case moves one input across one boundary (AUROC interval at exactly 0.5, a margin interval
at exactly 0, BH not rejecting, zero vs one pair), so a flipped comparison changes the outcome.
Pure: no model, no files.
"""

from __future__ import annotations

import pytest

from tamperbench.owmi.score.claims import KP_NAME, LEVELS, claim, structure_claim

RECON = ["reconstruction beats the observer bound (rule-scored, not human-validated): no reconstruction cell matches "
         "this cell (paper: reconstruction not scored, no ground-truth concept label; ours: rule-scored where the "
         "injected concept is recorded)",
         "reconstruction scoring human-validated (D.3: multiple raters, threshold fixed in advance): no human-validated "
         "subset supplied: no reconstruction claim is licensed"]  # reconstruction cases: test_owmi_reconstruction_claims.py


def det(pairs=12, auc=0.8125, ci=(0.625, 0.9375), rnd=(0.125, (0.0625, 0.25)), rnd_name="random_matched",
        obs=(0.25, (0.125, 0.375)), equivalence=None):
    margins = {}
    if rnd is not None:
        margins[rnd_name] = {"estimate": rnd[0], "ci": list(rnd[1])}
    if obs is not None:
        margins["observer"] = {"estimate": obs[0], "ci": list(obs[1]), "observer_tiers": [1, 3]}
    c = {"pairs": pairs, "auroc": auc, "auroc_ci": list(ci)}
    if equivalence:
        c["equivalence"] = equivalence
    return {"complete": c, "margins": margins}


KP = {"kind": "known_positive_check", "passes": True, "leakage_floor": {"auroc": 0.61},  # owmi known-positive --check
      "adapted": {"pairs": 100, "hits": 99, "false_alarms": 1, "dprime": 2.345, "auroc": 0.95678, "auroc_ci": [0.92, 0.99]}}
KP_LINE = (f"{KP_NAME}: adapted hits 99/100, false alarms 1/100, d'=2.35, AUROC=0.957 [0.920, 0.990]; "
           "leakage floor (unadapted AUROC) 0.610")
PROBE = {"passes": True, "m_probe": 0.4567, "layers": [{"null_quantile": 0.1234}]}
LADDER = {"m0": {"estimate": 0.2, "ci": [0.05, 0.3]}, "stratified": True, "reason": "m0 from 4 doses"}


# Eq. 20 measured and task accuracy shown unchanged (TOST), output divergence below its threshold: without them
# no cell goes above level 3 (D.5; test_owmi_audit_damage.py)
UNDAMAGED = {"measurable": True, "damaged": False, "delta_task": 0.0, "delta_task_ci": [-0.0625, 0.0625], "items": 12,
             "baseline_mean": 0.5, "divergence_js_mean": 0.001,
             "tost": {"unchanged": True, "ci90": [-0.05, 0.05], "margin": 0.1, "changed_pairs": 2,
                      "changed_share_upper95": 0.0625}}
DAMAGE_LINE = ("task accuracy unchanged at this dose (Eq. 20, D.5: TOST at margin +/- 0.1; detection not confined to task "
               "damage): Delta_task = +0.000 [-0.062, 0.062] over 12 items (baseline 0.500; divergence mean JS 0.0010); "
               "90% interval [-0.050, 0.050], 2 pairs changed (95% bound on the share 0.062); damage shown below 0 (the "
               "rule before): no")
DIVERGENCE_LINE = ("detection not confined to measurable output divergence (mean JS below 0.01 nats at this dose): mean JS "
                   "0.0010 nats (measurable output divergence: mean teacher-forced JS of the intervention runs >= 0.01 "
                   "nats per position)")


def run(d=None, *, kp=KP, probe=PROBE, ladder=LADDER, bh=True, damage=UNDAMAGED):
    return claim(det() if d is None else d, probe=probe, known_positive=kp, ladder=ladder, bh_reject=bh, damage=damage)


def test_every_condition_held_is_level_4_and_lists_each_line():
    v = run()
    assert v["level"] == 4 and v["claim"] == LEVELS[4] == "perturbation sensitivity without demonstrated semantic access"
    assert v["held"] == [
        "scorable pairs: 12 complete pairs",
        KP_LINE,
        "linear probe above its null at this site: m_probe=+0.457 vs null 95th pct +0.123",
        "detection exceeds paired sham (AUROC interval above 0.5, BH-controlled): AUROC=0.8125 [0.6250, 0.9375]",
        "margin over the random-matched control above zero: +0.1250 [+0.0625, +0.2500]",
        "margin over the observer bound above zero: +0.2500 [+0.1250, +0.3750] (tiers [1, 3])",
        "positive used-object m0 near zero dose (simplified Eq. 10 and used-object stratum: score.DOSE_MODEL): m0 from 4 doses",
        DAMAGE_LINE,
        DIVERGENCE_LINE,
    ]
    assert v["failed"] == [] and v["not_measured"] == RECON


@pytest.mark.parametrize("which", ["rnd", "obs"])
def test_a_control_interval_touching_zero_is_level_3(which):
    kw = {which: (0.1, (0.0, 0.2))}  # lower bound exactly 0: not above zero
    v = run(det(**kw))
    assert v["level"] == 3 and v["claim"] == LEVELS[3]
    name = "random-matched control" if which == "rnd" else "observer bound"
    assert [f.split(":")[0] for f in v["failed"]] == [f"margin over the {name} above zero"]


def test_missing_controls_are_not_measured_and_cap_the_claim_at_level_3():
    v = run(det(rnd=None, obs=None))
    assert v["level"] == 3
    assert "margin over the random-unit control above zero: no random-direction rows" in v["not_measured"]
    assert "margin over the observer bound above zero: no observer rows" in v["not_measured"]
    assert v["failed"] == []


def test_random_unit_control_is_read_when_no_matched_one_exists():
    v = run(det(rnd=(0.5, (0.25, 0.75)), rnd_name="random_unit"))
    assert v["level"] == 4
    assert "margin over the random-unit control above zero: +0.5000 [+0.2500, +0.7500]" in v["held"]


def test_matched_control_wins_over_unit_when_both_exist():
    d = det(rnd=(0.5, (0.25, 0.75)))  # random_matched above zero
    d["margins"]["random_unit"] = {"estimate": -0.5, "ci": [-0.75, -0.25]}
    v = run(d)
    assert v["level"] == 4 and any(h.startswith("margin over the random-matched control") for h in v["held"])


def test_auroc_interval_at_exactly_one_half_does_not_exceed_sham():
    v = run(det(ci=(0.5, 0.9)))  # anchors pass: a bounded null, not detection
    assert v["level"] == 2 and v["claim"] == LEVELS[2]
    assert v["failed"] == ["detection exceeds paired sham (AUROC interval above 0.5, BH-controlled): "
                           "AUROC=0.8125 [0.5000, 0.9000]"]
    assert run(det(ci=(0.5001, 0.9)))["level"] == 4


def test_bh_rejection_gates_detection_but_a_missing_bh_result_does_not():
    assert run(bh=False)["level"] == 2
    assert run(bh=None)["level"] == 4


def test_bounded_null_quotes_the_equivalence_bound():
    eq = [{"bound": 0.0525, "alpha": 0.05}, {"bound": 0.9, "alpha": 0.5}]
    v = run(det(ci=(0.4, 0.6), equivalence=eq))
    assert v["level"] == 2
    assert v["claim"] == LEVELS[2] + " (AUROC advantage below 5.25 percentage points at alpha 0.05)"
    # the equivalence bound is only quoted for a bounded null, never beside a positive finding
    assert run(det(equivalence=eq))["claim"] == LEVELS[4]


@pytest.mark.parametrize("kp,probe", [
    ({**KP, "passes": False}, PROBE), (KP, {**PROBE, "passes": False}), (None, PROBE), (KP, None),
    ({k: v for k, v in KP.items() if k != "passes"}, PROBE)])
def test_null_without_both_anchors_is_only_an_instrument_diagnosis(kp, probe):
    v = run(det(ci=(0.3, 0.7)), kp=kp, probe=probe)
    assert v["level"] == 1 and v["claim"] == LEVELS[1]


def test_anchor_lines_when_missing_or_failed():
    v = run(det(ci=(0.3, 0.7)), kp=None, probe=None)
    assert (KP_NAME + ": no known-positive check for this model, site and read-out (owmi known-positive --check --layer L "
            "--readout R)") in v["not_measured"]
    assert "linear probe above its null at this site: no probe anchor at this site" in v["not_measured"]
    bad = {**PROBE, "passes": False, "layers": [{"null_quantile": None}]}
    v = run(det(ci=(0.3, 0.7)), kp={**KP, "passes": False}, probe=bad)
    assert KP_LINE in v["failed"]
    assert "linear probe above its null at this site: m_probe=+0.457 vs null 95th pct n/a" in v["failed"]


def test_detection_with_controls_but_failed_anchors_stays_level_4():
    # D.5 level 5 needs a (human-validated) reconstruction, absent here: failed anchors cannot lower level 4
    v = run(kp={**KP, "passes": False}, probe=None, ladder=None)
    assert v["level"] == 4


def test_zero_pairs_is_no_claim_one_pair_is_scorable():
    v = run(det(pairs=0))
    assert v["level"] == 0 and v["claim"] == LEVELS[0]
    assert v["failed"] == ["scorable pairs: 0 complete pairs"]
    assert ("detection exceeds paired sham (AUROC interval above 0.5, BH-controlled): -") in v["not_measured"]
    v1 = run(det(pairs=1))
    assert v1["level"] == 4 and v1["held"][0] == "scorable pairs: 1 complete pairs"


def test_no_detection_entry_at_all_is_no_claim():
    v = claim(None, probe=None, known_positive=None, ladder=None, bh_reject=None)
    assert v["level"] == 0 and v["held"] == [] and v["failed"] == ["scorable pairs: 0 complete pairs"]
    assert "margin over the random-unit control above zero: no random-direction rows" in v["not_measured"]
    assert "positive used-object m0 near zero dose (simplified Eq. 10 and used-object stratum: score.DOSE_MODEL): no dose ladder" in v["not_measured"]


@pytest.mark.parametrize("ladder,line,where", [
    (None, "no dose ladder", "not_measured"),
    ({"m0": {"ci": [0.05, 0.3]}, "stratified": False, "reason": "ladder of 3 doses"},
     "ladder of 3 doses (no used-object stratum)", "not_measured"),
    ({"m0": None, "stratified": True, "reason": "too few doses"}, "too few doses", "not_measured"),
    ({"m0": {"ci": [0.0, 0.3]}, "stratified": True}, "", "failed"),
    ({"m0": {"ci": [-0.2, 0.3]}, "stratified": True, "reason": None}, "", "failed"),
    ({"m0": {"ci": [1e-9, 0.3]}, "stratified": True, "reason": "r"}, "r", "held"),
])
def test_m0_condition(ladder, line, where):
    v = run(ladder=ladder)
    assert f"positive used-object m0 near zero dose (simplified Eq. 10 and used-object stratum: score.DOSE_MODEL): {line}" in v[where]


def test_structure_claim_words():
    both = {"estimable": True, "delta": {"domain": {"established": True}, "object": {"established": True}}}
    assert structure_claim(both) == ("the reportability profile has structure beyond seed variation "
                                     "(Delta_domain and Delta_object > 0)")
    none = {"estimable": True, "delta": {"domain": {"established": False}, "object": {}}}
    assert structure_claim(none) == ("domain/object structure unsupported (Delta_domain, Delta_object interval "
                                     "reaches zero or below)")
    dom_only = {"estimable": True, "delta": {"domain": {"established": False}, "object": {"established": True}}}
    assert structure_claim(dom_only) == "domain/object structure unsupported (Delta_domain interval reaches zero or below)"
    assert structure_claim({"estimable": True, "delta": {}}).startswith("domain/object structure unsupported (Delta_domain, ")
    assert structure_claim({"estimable": False, "reason": "one object"}) == \
        "domain/object structure: not assessable (one object)"
    assert structure_claim({}) == "domain/object structure: not assessable (no estimate)"


def test_detection_entry_without_an_auroc_reads_nan():
    d = det()
    del d["complete"]["auroc"]
    v = run(d)
    assert ("detection exceeds paired sham (AUROC interval above 0.5, BH-controlled): AUROC=nan [0.6250, 0.9375]"
            in v["held"])
