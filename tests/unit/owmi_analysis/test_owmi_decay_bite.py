"""The published forms of the OWMI temporal-decay contrasts (decay.py): the model line, the flat
rows of the CSV / site table, and the Markdown section, on a result written here by hand.

Why: ``test_owmi_decay.py`` checks the numbers; these three functions decide which number lands in
which column and which words stand beside it, and a swapped column (x for y, the inclusive
interval in place of the primary one) would publish a wrong figure with no test noticing. Every
expected row and line is spelled out here from the hand-written input. Pure: no model, no files.
"""

from __future__ import annotations

from tamperbench.owmi.analysis.decay import decay_markdown, decay_rows, decay_summary

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
                  "inclusive_auroc_diff": 0.19, "inclusive_auroc_diff_ci": "[0.0100, 0.3000]"}
    assert list(ab) == list(bc)  # one CSV header for every row
    assert bc == {**{k: None for k in ab}, "model": "m|x", "dtype": "float32", "cell": LABEL,
                  "contrast": "B_delayed - C", "role": "primary (Eq. 19)", "track_x": "B_delayed", "track_y": "C",
                  "verdict": "one_leg", "reason": "Track C not executed in this cell (no intervention/sham rows)",
                  "dprime_diff_ci": "n/a", "auroc_diff_ci": "n/a", "inclusive_dprime_diff_ci": "n/a",
                  "inclusive_auroc_diff_ci": "n/a"}


def test_rows_of_a_result_without_decay():
    assert decay_rows({}) == [] and decay_rows({"decay": None}) == [] and decay_rows({"decay": {}}) == []


def test_markdown_section_line_by_line():
    assert decay_markdown(RESULT) == [
        "", "## Temporal decay across tracks (Eq. 19; Appendix D.2, D.5)", "",
        "Item-paired contrasts x - y of the detection margin (complete-pair coding; 90% item-clustered bootstrap, "
        "200 replicates, seed 3, both tracks of an item resampled together). Rule: Rule \\| text", "",
        "| model | cell | contrast | role | items paired (dropped x / y) | pairs x / y | d' x / y | d' diff [90%] | "
        "AUROC x / y | AUROC diff [90%] | BH q | positive | inclusive coding: d' / AUROC diff |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| m\\|x | {LABEL} | A - B_delayed | primary (Eq. 19) | 7 (1 / 2) | 14 / 13 | 1.235 / 0.500 | "
        "0.735 [0.1000, 1.2000] | 0.800 / 0.600 | 0.200 [0.0500, 0.3500] | 0.0200 | True | 0.700 / 0.190 |",
        f"| m\\|x | {LABEL} | B_delayed - C | primary (Eq. 19) | not estimable: Track C not executed in this cell "
        "(no intervention/sham rows) | | | | | | | | |",
        "",
        "- **m\\|x · bench · resid_post.3 · active**: decay licensed for the A -> B_delayed pair only \\| x",
        "  - Delta_{A-B_delayed} positive: numbers",
        "  - Delta_{B_delayed-C} not estimable \\| reason",
    ]
    assert decay_markdown({}) == [] and decay_markdown({"decay": None}) == []


def test_summary_line_counts_each_verdict_of_the_model():
    cells = [{"cell": {"model": m}, "verdict": {"level": lv}} for m, lv in
             (("m", "one_leg"), ("m", "licensed"), ("other", "not_licensed"), ("m", "not_estimable"), ("m", "one_leg"),
              ("m", "not_licensed"))]
    assert decay_summary({"cells": cells}, "m") == ("temporal decay (Eq. 19, D.5): licensed in 1 of 5 cells, one pair "
                                                    "only in 2 of 5 cells, not licensed in 1 of 5 cells, not estimable "
                                                    "in 1 of 5 cells")
    assert decay_summary({"cells": cells}, "other") == "temporal decay (Eq. 19, D.5): not licensed in 1 of 1 cells"
    assert decay_summary({"cells": cells}, "absent") == \
        "temporal decay (Eq. 19): not estimable (no detection or spontaneous rows)"
    assert decay_summary(None, "m") == decay_summary({}, "m") == "temporal decay: not analysed"
