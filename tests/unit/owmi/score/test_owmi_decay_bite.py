"""The published forms of the OWMI temporal-decay contrasts (decay.py): the model line, the flat
rows of the CSV / site table, and the Markdown section, on a result written here by hand.

Why: ``test_owmi_decay.py`` checks the numbers; these three functions decide which number lands in
which column and which words stand beside it, and a swapped column (x for y, the inclusive
interval in place of the primary one) would publish a wrong figure with no test noticing. Every
expected row and line is spelled out here from the hand-written input. Pure: no model, no files.
"""

from __future__ import annotations

from tamperbench.owmi.score.decay import decay_markdown, decay_rows, decay_summary

CELL = {"model": "m|x", "model_revision": "r", "dtype": "float32", "benchmark": "bench", "site": "resid_post.3",
        "operator": "add", "dose": 2.5, "hook_scope": "active"}
AB = {"contrast": "A - B_delayed", "tracks": ["A", "B_delayed"], "role": "primary (Eq. 19)", "estimable": True,
      "reason": None, "items_paired": 7, "items_dropped": {"A": 1, "B_delayed": 2}, "pairs": {"A": 14, "B_delayed": 13},
      "dprime": {"A": 1.23456, "B_delayed": 0.5, "diff": 0.73456, "ci": [0.1, 1.2]},
      "auroc": {"A": 0.8, "B_delayed": 0.6, "diff": 0.2, "ci": [0.05, 0.35]},
      "p_value": 0.01, "bh_q": 0.02, "positive": True,
      "inclusive": {"estimable": True, "dprime_diff": 0.7, "dprime_ci": [0.0, 1.0], "auroc_diff": 0.19,
                    "auroc_ci": [0.01, 0.3]}}
BC = {"contrast": "B_delayed - C", "tracks": ["B_delayed", "C"], "role": "primary (Eq. 19)", "estimable": False,
      "reason": "Track C not executed in this cell (no intervention/sham rows)",
      "excluded_pairs": {"B_delayed": {}, "C": {}}, "inclusive": {"estimable": False, "reason": "same"}}
VERDICT = {"level": "one_leg", "claim": "decay licensed for the A -> B_delayed pair only | x",
           "legs": ["Delta_{A-B_delayed} positive: numbers", "Delta_{B_delayed-C} not estimable | reason"]}
RESULT = {"decay": {"n_boot": 200, "seed": 3, "level": 0.9, "coding": "complete", "rule": "Rule | text",
                    "cells": [{"cell": CELL, "contrasts": [AB, BC], "verdict": VERDICT}]}}
LABEL = "bench · resid_post.3 · add@2.5 · active"


def test_rows_put_each_number_in_its_column():
    ab, bc = decay_rows(RESULT)
    assert ab == {"model": "m|x", "dtype": "float32", "cell": LABEL, "contrast": "A - B_delayed",
                  "role": "primary (Eq. 19)", "track_x": "A", "track_y": "B_delayed", "items_paired": 7,
                  "items_dropped_x": 1, "items_dropped_y": 2, "pairs_x": 14, "pairs_y": 13, "verdict": "one_leg",
                  "reason": "", "dprime_x": 1.23456, "dprime_y": 0.5, "dprime_diff": 0.73456,
                  "dprime_diff_ci": "[0.1000, 1.2000]", "auroc_x": 0.8, "auroc_y": 0.6, "auroc_diff": 0.2,
                  "auroc_diff_ci": "[0.0500, 0.3500]", "p_value": 0.01, "bh_q": 0.02, "positive": True,
                  "inclusive_dprime_diff": 0.7, "inclusive_dprime_diff_ci": "[0.0000, 1.0000]",
                  "inclusive_auroc_diff": 0.19, "inclusive_auroc_diff_ci": "[0.0100, 0.3000]",
                  "model_revision": "r", "quantized": False, "identity": "m|x @ r float32"}
    assert list(ab) == list(bc)  # one CSV header for every row
    assert bc == {**{k: None for k in ab}, "model": "m|x", "dtype": "float32", "cell": LABEL,
                  "contrast": "B_delayed - C", "role": "primary (Eq. 19)", "track_x": "B_delayed", "track_y": "C",
                  "verdict": "one_leg", "reason": "Track C not executed in this cell (no intervention/sham rows)",
                  "dprime_diff_ci": "n/a", "auroc_diff_ci": "n/a", "inclusive_dprime_diff_ci": "n/a",
                  "inclusive_auroc_diff_ci": "n/a", "model_revision": "r", "quantized": False,
                  "identity": "m|x @ r float32"}


def test_rows_of_a_quantized_cell_say_so():
    """A dequantized GGUF's cell: the CSV row carries quantized = True and its label says "(quantized)",
    so it is never read as the float32 weights it was dequantized to."""
    cells = [{"cell": {**CELL, "quantized": True}, "contrasts": [AB], "verdict": VERDICT},
             {"cell": CELL, "contrasts": [AB], "verdict": VERDICT}]
    q, full = decay_rows({"decay": {**RESULT["decay"], "cells": cells}})
    assert (q["model_revision"], q["quantized"], q["identity"]) == ("r", True, "m|x @ r float32 (quantized)")
    assert (full["quantized"], full["identity"]) == (False, "m|x @ r float32")
    assert {k: v for k, v in q.items() if k not in ("quantized", "identity")} == \
        {k: v for k, v in full.items() if k not in ("quantized", "identity")}


def test_rows_of_a_result_without_decay():
    assert decay_rows({}) == [] and decay_rows({"decay": None}) == [] and decay_rows({"decay": {}}) == []


def test_markdown_section_line_by_line():
    """Names, cell labels and claim text are inert Markdown (render._e): ``|`` and ``_`` backslash-escaped,
    ``>`` an entity (a viewer shows them as typed; no HTML or emphasis acts)."""
    LABEL_MD = LABEL.replace("_", "\\_")
    assert decay_markdown(RESULT) == [
        "", "## Temporal decay across tracks (Eq. 19; Appendix D.2, D.5)", "",
        "Item-paired contrasts x - y of the detection margin (complete-pair coding; 90% item-clustered bootstrap, "
        "200 replicates, seed 3, both tracks of an item resampled together). Rule: Rule \\| text", "",
        "| model | cell | contrast | role | items paired (dropped x / y) | pairs x / y | d' x / y | d' diff [90%] | "
        "AUROC x / y | AUROC diff [90%] | BH q | positive | inclusive coding: d' / AUROC diff |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| m\\|x @ r float32 | {LABEL_MD} | A - B_delayed | primary (Eq. 19) | 7 (1 / 2) | 14 / 13 | 1.235 / 0.500 | "
        "0.735 [0.1000, 1.2000] | 0.800 / 0.600 | 0.200 [0.0500, 0.3500] | 0.0200 | True | 0.700 / 0.190 |",
        f"| m\\|x @ r float32 | {LABEL_MD} | B_delayed - C | primary (Eq. 19) | not estimable: Track C not executed in this cell "
        "(no intervention/sham rows) | | | | | | | | |",
        "",
        "- **m\\|x @ r float32 · bench · resid\\_post.3 · active**: decay licensed for the A -&gt; B\\_delayed pair only \\| x",
        "  - Delta\\_{A-B\\_delayed} positive: numbers",
        "  - Delta\\_{B\\_delayed-C} not estimable \\| reason",
    ]
    assert decay_markdown({}) == [] and decay_markdown({"decay": None}) == []
    # a not-estimable row first does not end the table
    swapped = {"decay": {**RESULT["decay"], "cells": [{"cell": CELL, "contrasts": [BC, AB], "verdict": VERDICT}]}}
    lines = decay_markdown(swapped)
    assert lines[7].startswith("| m\\|x @ r float32 | bench · resid\\_post.3 · add@2.5 · active | B_delayed - C |")
    assert lines[8].startswith("| m\\|x @ r float32 | bench · resid\\_post.3 · add@2.5 · active | A - B_delayed |")


def test_summary_line_counts_each_verdict_of_one_model_identity():
    """The line counts the cells of one identity (model, revision, dtype, quantized): the same name at
    bfloat16, at another revision or quantized is another model's line, never counted in."""
    f32, bf16, rev2, quant = ("m", "r", "float32", False), ("m", "r", "bfloat16", False), ("m", "r2", "float32", False), \
        ("m", "r", "float32", True)
    cells = [{"cell": dict(zip(("model", "model_revision", "dtype", "quantized"), i)), "verdict": {"level": lv}}
             for i, lv in ((f32, "one_leg"), (f32, "licensed"), (("other", "r", "float32", False), "not_licensed"),
                           (f32, "not_estimable"), (bf16, "licensed"), (f32, "one_leg"), (rev2, "one_leg"),
                           (f32, "not_licensed"), (quant, "not_estimable"), (bf16, "licensed"))]
    assert decay_summary({"cells": cells}, f32) == ("temporal decay (Eq. 19, D.5): licensed in 1 of 5 cells, one pair "
                                                    "only in 2 of 5 cells, not licensed in 1 of 5 cells, not estimable "
                                                    "in 1 of 5 cells")
    assert decay_summary({"cells": cells}, bf16) == "temporal decay (Eq. 19, D.5): licensed in 2 of 2 cells"
    assert decay_summary({"cells": cells}, rev2) == "temporal decay (Eq. 19, D.5): one pair only in 1 of 1 cells"
    assert decay_summary({"cells": cells}, quant) == "temporal decay (Eq. 19, D.5): not estimable in 1 of 1 cells"
    assert decay_summary({"cells": cells}, ("other", "r", "float32", False)) == \
        "temporal decay (Eq. 19, D.5): not licensed in 1 of 1 cells"
    # a cell written without the quantized flag (older records) is full precision
    old = [{"cell": {"model": "m", "model_revision": "r", "dtype": "float32"}, "verdict": {"level": "licensed"}}]
    assert decay_summary({"cells": old}, f32) == "temporal decay (Eq. 19, D.5): licensed in 1 of 1 cells"
    assert decay_summary({"cells": cells}, ("absent", "r", "float32", False)) == \
        "temporal decay (Eq. 19): not estimable (no detection or spontaneous rows)"
    assert decay_summary(None, f32) == decay_summary({}, f32) == "temporal decay: not analysed"


# -- the contrasts themselves, on rows built so that every number is known by hand ------------------------------

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy.stats import norm  # noqa: E402

from tamperbench.errors import UserError  # noqa: E402
from tamperbench.owmi.score.decay import (CLAIMS, RULE, TRACK_PATHS, decay_contrasts, decay_verdict,  # noqa: E402
                                             track_contrast, track_rows)


def rec(track, item, cond, det, graded=None, *, seed=0, parse_ok=True, scope="active", family=None):
    pid = f"{track}-{item}-{seed}-{scope}"
    c = track == "C"
    return dict(key=f"{pid}-{cond}", pair_id=pid, model="m", model_revision="rev", dtype="float32", benchmark="b",
                site="resid_post.1", operator="add", dose=8.0, hook_scope=scope, track=track,
                probe_family=family or ("spontaneous" if c else "detection"), condition=cond, item_id=f"item{item:02d}",
                seed=seed, parse_ok=parse_ok, detected=None if c else det, graded=None if c else graded,
                rubric_flag=det if c else None, run="r1")


def same_items(track, n, int_det, int_g, sham_det, sham_g):
    """n items that all hold the same pair: every bootstrap replicate gives the same margins."""
    return [rec(track, i, cond, d, g) for i in range(n)
            for cond, d, g in (("intervention", int_det, int_g), ("sham", sham_det, sham_g))]


def test_constant_replicates_zero_se_and_a_one_sided_interval():
    # A: 4 hits of 4, 0 false alarms; B: 4 hits, 4 false alarms. Scores separate in both tracks (AUROC 1).
    a = same_items("A", 4, True, 0.9, False, 0.1)
    b = same_items("B_delayed", 4, True, 0.9, True, 0.1)
    c = track_contrast(track_rows(a, "A"), track_rows(b, "B_delayed"), "A", "B_delayed", n_boot=30, seed=1)
    d_a = norm.ppf(1 - 1 / 8) - norm.ppf(1 / 8)  # rates clipped to [1/2N, 1 - 1/2N], N = 4
    assert c["dprime"]["A"] == pytest.approx(d_a) and c["dprime"]["B_delayed"] == pytest.approx(0.0)
    assert c["dprime"]["ci"] == pytest.approx([d_a, d_a]) and c["dprime"]["se"] == pytest.approx(0.0, abs=1e-12)
    assert c["auroc"]["A"] == c["auroc"]["B_delayed"] == 1.0 and c["auroc"]["ci"] == [0.0, 0.0]
    assert c["auroc"]["se"] == 0.0 and c["p_value"] == 1.0  # no spread, no difference: p = 1
    assert c["interval_above_zero"] is False and c["positive"] is False  # d' above zero is not enough: AUROC at 0
    assert c["rates"] == {"A": {"hit": 1.0, "false_alarm": 0.0}, "B_delayed": {"hit": 1.0, "false_alarm": 1.0}}
    assert c["pairs"] == {"A": 4, "B_delayed": 4} and c["items_paired"] == 4
    assert c["dprime"]["A_ci"] == pytest.approx([d_a, d_a])
    assert c["auroc"]["B_delayed_ci"] == [1.0, 1.0]
    # scores that separate in A only: a constant, non-zero AUROC difference with zero spread has p = 0
    b2 = same_items("B_delayed", 4, True, 0.1, True, 0.9)
    c2 = track_contrast(track_rows(a, "A"), track_rows(b2, "B_delayed"), "A", "B_delayed", n_boot=30, seed=1)
    assert c2["auroc"]["diff"] == 1.0 and c2["auroc"]["se"] == 0.0 and c2["p_value"] == 0.0
    assert c2["interval_above_zero"] is True


def test_one_and_zero_replicates():
    a = same_items("A", 3, True, 0.9, False, 0.1)
    b = same_items("B_delayed", 3, True, 0.1, True, 0.9)
    one = track_contrast(track_rows(a, "A"), track_rows(b, "B_delayed"), "A", "B_delayed", n_boot=1)
    assert np.isnan(one["auroc"]["se"]) and one["p_value"] == 0.0  # one replicate: no SE; diff 1 != 0
    two = track_contrast(track_rows(a, "A"), track_rows(b, "B_delayed"), "A", "B_delayed", n_boot=2)
    assert two["auroc"]["se"] == 0.0
    none = track_contrast(track_rows(a, "A"), track_rows(b, "B_delayed"), "A", "B_delayed", n_boot=0)
    assert np.isnan(none["p_value"]) and np.isnan(none["auroc"]["se"]) and none["estimable"] is True
    assert all(np.isnan(v) for v in none["dprime"]["ci"] + none["auroc"]["A_ci"])
    assert none["interval_above_zero"] is None and none["positive"] is None
    assert none["auroc"]["diff"] == 1.0  # the point estimates stand without replicates


def test_defaults_are_2000_replicates_seed_0_level_95_complete_pairs():
    rng = np.random.default_rng(0)
    rows = [rec(t, i, cond, bool(rng.random() < 0.5), float(rng.random())) for t in ("A", "B_delayed")
            for i in range(6) for cond in ("intervention", "sham")]
    rows[0] = {**rows[0], "parse_ok": False, "detected": None, "graded": None}
    d = decay_contrasts(rows)
    assert (d["n_boot"], d["seed"], d["level"], d["coding"]) == (2000, 0, 0.95, "complete")
    first = d["cells"][0]["contrasts"][0]  # decay_contrasts hands its (default) settings to track_contrast
    got = track_contrast(track_rows(rows, "A"), track_rows(rows, "B_delayed"), "A", "B_delayed")
    assert (got["dprime"], got["auroc"], got["pairs"]) == (first["dprime"], first["auroc"], {"A": 5, "B_delayed": 5})


def test_reasons_when_a_contrast_cannot_be_estimated():
    a = same_items("A", 3, True, 0.9, False, 0.1)
    b = [rec("B_delayed", i, "intervention", True, 0.5) for i in range(3)]  # no shams at all
    c = track_contrast(track_rows(a, "A"), track_rows(b, "B_delayed"), "A", "B_delayed", n_boot=5)
    assert c["estimable"] is False and "items_paired" not in c
    assert c["reason"] == "Track B_delayed has no complete intervention-sham pair (excluded: {'missing_sham': 3})"
    assert c["excluded_pairs"] == {"A": {}, "B_delayed": {"missing_sham": 3}}
    c = track_contrast([], track_rows(a, "A"), "B_delayed", "A", n_boot=5)
    assert c["reason"] == "Track B_delayed not executed in this cell (no intervention/sham rows)"
    other = [{**r, "item_id": "other" + r["item_id"]} for r in same_items("B_delayed", 2, True, 0.5, False, 0.4)]
    c = track_contrast(track_rows(a, "A"), track_rows(other, "B_delayed"), "A", "B_delayed", n_boot=5)
    assert c["reason"] == "no item has complete pairs in both Track A and Track B_delayed"
    assert c["items_paired"] == 0 and c["items_dropped"] == {"A": 3, "B_delayed": 2}
    assert (c["contrast"], c["tracks"]) == ("A - B_delayed", ["A", "B_delayed"])


def test_track_rows_reads_c_through_the_rubric_flag():
    rows = [{**rec("C", 0, "intervention", True), "graded": 0.7}, rec("C", 0, "sham", None), rec("C", 1, "random_unit", True),
            rec("C", 2, "sham", False, parse_ok=False), rec("C", 3, "intervention", True, family="detection"),
            rec("A", 0, "intervention", True, 0.7), rec("A", 0, "observer", True, 0.7),
            rec("A", 1, "sham", False, 0.2, family="confidence"), rec("B_delayed", 0, "sham", False, 0.1)]
    c = track_rows(rows, "C")
    assert [(r["item_id"], r["condition"], r["detected"], r["graded"], r["parse_ok"]) for r in c] == [
        ("item00", "intervention", True, None, True), ("item00", "sham", None, None, False),
        ("item02", "sham", False, None, False)]
    assert [(r["item_id"], r["condition"]) for r in track_rows(rows, "A")] == [("item00", "intervention")]
    assert track_rows(rows, "A")[0] is rows[5]  # A/B rows pass through unchanged


def _contrast(x, y, *, estimable=True, positive=True, reason=None):
    c = {"tracks": [x, y], "estimable": estimable, "reason": reason, "positive": positive, "items_paired": 9,
         "dprime": {"diff": 0.5, "ci": [0.125, 0.875]}, "auroc": {"diff": -0.25, "ci": [-0.5, 0.0625]}}
    return c


def test_verdict_words_for_every_leg_status():
    nums = "d' diff +0.500 [+0.125, +0.875], AUROC diff -0.250 [-0.500, +0.062], 9 items"
    v = decay_verdict([_contrast("A", "B_delayed"), _contrast("B_delayed", "C")])
    assert v == {"level": "licensed", "claim": CLAIMS["licensed"] + " (Track C is read through the condition-blinded "
                 "rubric flag, a proxy not validated against human raters (D.3))",
                 "legs": [f"Delta_{{A-B_delayed}} positive: {nums}", f"Delta_{{B_delayed-C}} positive: {nums}"]}
    v = decay_verdict([_contrast("A", "B_delayed", positive=False),
                       _contrast("B_delayed", "C", estimable=False, reason="Track C not executed")])
    assert v == {"level": "not_licensed", "claim": CLAIMS["not_licensed"],
                 "legs": [f"Delta_{{A-B_delayed}} not positive: {nums}",
                          "Delta_{B_delayed-C} not estimable: Track C not executed"]}
    v = decay_verdict([_contrast("A", "B_delayed", positive=None), _contrast("B_delayed", "C", positive=False)])
    assert v["level"] == "not_licensed" and v["legs"][0] == f"Delta_{{A-B_delayed}}: no interval ({nums})"
    assert v["claim"].endswith("(D.3))")
    paths = {**TRACK_PATHS, "B_delayed": {"validated": False}}
    v = decay_verdict([_contrast("A", "B_delayed"), _contrast("B_delayed", "C", positive=False)], paths)
    assert v["level"] == "not_licensed"
    assert v["legs"][0] == f"Delta_{{A-B_delayed}}: path of Track B_delayed not validated by a targeted test ({nums})"
    v = decay_verdict([_contrast("A", "B_delayed"), _contrast("B_delayed", "C")], {"A": {"validated": True}})
    assert v["level"] == "not_licensed" and "path of Track B_delayed, C not validated" in v["legs"][1]
    v = decay_verdict([_contrast("A", "B_delayed", positive=False), _contrast("B_delayed", "C")])
    assert v["level"] == "one_leg" and v["claim"].startswith(CLAIMS["one_leg"].format(x="B_delayed", y="C"))
    # secondary contrasts never enter, and an all-not-estimable cell says so without the Track C caveat
    v = decay_verdict([_contrast("A", "B_masked"), _contrast("A", "B_delayed", estimable=False, reason="r"),
                       _contrast("B_delayed", "C", estimable=False, reason="s")])
    assert v == {"level": "not_estimable", "claim": CLAIMS["not_estimable"],
                 "legs": ["Delta_{A-B_delayed} not estimable: r", "Delta_{B_delayed-C} not estimable: s"]}
    assert decay_verdict([_contrast("A", "B_masked")])["level"] == "not_estimable"


def test_cell_record_roles_fdr_and_unknown_track_message():
    rng = np.random.default_rng(1)
    rows = []
    for t in ("A", "B_delayed", "B_visible"):
        rows += [rec(t, i, cond, bool(rng.random() < p), float(rng.random())) for i in range(8)
                 for cond, p in (("intervention", 0.7), ("sham", 0.3))]
    rows.append(rec("A", 0, "intervention", True, 0.5, family="confidence"))  # not a detection report: no cell
    rows.append(rec("A", 0, "observer", True, 0.5, scope="lifted"))  # an observer row alone makes no cell either
    rows.append(rec("A", 0, "intervention", True, 0.5, scope="other", family="confidence"))
    d = decay_contrasts(rows, n_boot=50, seed=2, level=0.8)
    assert (d["rule"], d["track_paths"]) == (RULE, TRACK_PATHS)
    assert d["fdr"] == ("Benjamini-Hochberg at alpha 0.2 over the Eq. 19 contrasts of every cell (AUROC difference, "
                        "normal p from the bootstrap SE)")
    (cell,) = d["cells"]
    assert cell["cell"] == {"model": "m", "model_revision": "rev", "dtype": "float32", "quantized": False, "benchmark": "b",
                            "site": "resid_post.1", "operator": "add", "dose": 8.0, "hook_scope": "active",
                            "readout": "generated"}
    assert [(c["contrast"], c["role"]) for c in cell["contrasts"]] == [
        ("A - B_delayed", "primary (Eq. 19)"), ("B_delayed - C", "primary (Eq. 19)"),
        ("A - B_visible", "secondary: immediate-path context, not delay")]
    ab, bc, av = cell["contrasts"]
    assert bc["inclusive"] == {"estimable": False, "reason": bc["reason"]} and "bh_q" not in bc
    # one estimable primary contrast: BH over a family of one leaves p unchanged; the secondary row takes no BH
    assert ab["bh_q"] == pytest.approx(ab["p_value"]) and "bh_q" not in av
    assert ab["bh_reject"] is bool(ab["p_value"] <= 0.2)
    assert ab["positive"] is bool(ab["interval_above_zero"] and ab["bh_reject"])
    assert av["positive"] is av["interval_above_zero"]
    inc = ab["inclusive"]
    assert inc["estimable"] is True and (inc["items_paired"], inc["pairs"]) == (8, {"A": 8, "B_delayed": 8})
    assert inc["dprime_diff"] == pytest.approx(ab["dprime"]["diff"]) and inc["auroc_ci"] == pytest.approx(ab["auroc"]["ci"])
    bad = {**rows[0], "track": "D", "key": None, "pair_id": "pX"}
    del bad["run"]
    with pytest.raises(UserError) as err:
        decay_contrasts([bad], n_boot=5)
    assert str(err.value) == ("track: record pX in the runs has unknown track 'D' (expected one of A, B_visible, "
                              "B_masked, B_delayed, C)")
    with pytest.raises(UserError, match=r"^track: record pX in runs/x has unknown track 'D'"):
        decay_contrasts([{**bad, "run": "runs/x"}], n_boot=5)


def test_fdr_family_alpha_and_missing_intervals():
    """BH by hand over the family p = (0.03, 0.12, 0.12), m = 3: q = (0.09, 0.12, 0.12); at alpha 0.2 all three are
    rejected (0.03 <= 0.2/3, 0.12 <= 0.4/3, 0.12 <= 0.2), at the default 0.05 none (0.03 > 0.05/3, 0.12 > 0.05).
    Secondary and not-estimable contrasts stay out of the family; no interval, no verdict."""
    from tamperbench.owmi.score.decay import _fdr

    def c(x, y, p, above=True, estimable=True):
        return {"tracks": [x, y], "estimable": estimable, "p_value": p, "interval_above_zero": above}

    cells = [{"contrasts": [c("A", "B_delayed", 0.03), c("A", "B_visible", 0.5), c("B_delayed", "C", None, estimable=False)]},
             {"contrasts": [c("A", "B_delayed", 0.12, above=None), c("B_delayed", "C", 0.12)]}]
    _fdr(cells, alpha=0.2)
    (ab, av, bc), (ab2, bc2) = cells[0]["contrasts"], cells[1]["contrasts"]
    assert (ab["bh_q"], ab["bh_reject"], ab["positive"]) == (pytest.approx(0.09), True, True)
    assert (ab2["bh_q"], ab2["bh_reject"], ab2["positive"]) == (pytest.approx(0.12), True, None)
    assert (bc2["bh_reject"], bc2["positive"]) == (True, True)
    assert "bh_q" not in av and "positive" not in av and "bh_q" not in bc
    _fdr(cells, alpha=0.05)
    assert [x["bh_reject"] for x in (ab, ab2, bc2)] == [False, False, False]
    assert (ab["positive"], ab2["positive"]) == (False, None)


def test_inclusive_coding_reaches_both_tracks_and_cells_sort_as_text():
    a = same_items("A", 3, True, 0.9, False, 0.1)
    b = same_items("B_delayed", 3, True, 0.8, False, 0.3)
    b[1] = {**b[1], "parse_ok": False, "detected": None, "graded": None}  # B's item00 sham report unparsed
    c = track_contrast(track_rows(a, "A"), track_rows(b, "B_delayed"), "A", "B_delayed", n_boot=5, coding="inclusive")
    assert c["pairs"] == {"A": 3, "B_delayed": 3} and c["rates"]["B_delayed"]["false_alarm"] == 0.0
    d = decay_contrasts(a + b, n_boot=5, coding="inclusive")
    assert d["coding"] == "inclusive" and d["cells"][0]["contrasts"][0]["pairs"] == {"A": 3, "B_delayed": 3}
    assert decay_contrasts(a + b, n_boot=5)["cells"][0]["contrasts"][0]["pairs"] == {"A": 2, "B_delayed": 2}
    # cells are ordered by the text of their key (a key may hold None): dose "16.0" sorts before "8.0"
    rows = a + [{**r, "dose": 16.0, "key": "z" + r["key"]} for r in a]  # its rows would sort last
    assert [cell["cell"]["dose"] for cell in decay_contrasts(rows, n_boot=5)["cells"]] == [16.0, 8.0]


def test_marginal_intervals_take_the_level_and_the_verdict_reads_lower_bounds():
    from tamperbench.stats.bootstrap import detection_bootstrap
    from tamperbench.stats.pairs import paired_detection

    rng = np.random.default_rng(7)
    rows = [rec(t, i, cond, bool(rng.random() < 0.5), float(rng.random())) for t in ("A", "B_delayed")
            for i in range(8) for cond in ("intervention", "sham")]
    x, y = track_rows(rows, "A"), track_rows(rows, "B_delayed")
    c = track_contrast(x, y, "A", "B_delayed", n_boot=200, seed=5, level=0.8)
    for t, tr in (("A", x), ("B_delayed", y)):  # same items, same draws: the stats module's own 80% intervals
        p = paired_detection(tr)
        b = detection_bootstrap(p["y_a"], p["y_b"], p["clusters"], g_int=p["g_a"], g_sham=p["g_b"], n_boot=200, seed=5,
                                level=0.8)
        assert c["dprime"][f"{t}_ci"] == pytest.approx(list(b["dprime"]["ci"]))
        assert c["auroc"][f"{t}_ci"] == pytest.approx(list(b["auroc"]["ci"]))
    # equal report rates: both difference intervals straddle zero, so the interval is not above zero
    assert all(c[s]["ci"][0] < 0 < c[s]["ci"][1] for s in ("dprime", "auroc")), (c["dprime"]["ci"], c["auroc"]["ci"])
    assert c["interval_above_zero"] is False
