"""Exact Words' paper view, issue 34 item 5: the fix decides first, no_answer, corrected/dirty, the spread.

The seed (002) defines corrected as "the planted error got fixed". ``quote/scorer.py`` checks a changed
character before a contained correction, so a quote that fixes the planted error and changes one other
character is our ``rewritten/changed_character``; the paper view must still call it ``corrected``.
Red before the fix: every case below came out ``rewritten`` in the paper view, ``corrected/dirty`` counted
only our own ``corrected`` class, and the spread counted byte-identical faithful under ``--taxonomy paper``.
"""

from __future__ import annotations

import json

import pytest

from tamperbench.quote.items import items_by_id
from tamperbench.quote.scorer import score_response
from tamperbench.quote.tables import summarise
from tamperbench.quote.taxonomy import paper_class

ITEMS = items_by_id()
S28 = ITEMS["S28"].gold  # "They can definately hold the main hall for 3 and 4 April, ..."
S01 = ITEMS["S01"].gold  # "... currently recieve two separate case numbers, ..."


@pytest.mark.parametrize("item, answer", [
    ("S28", S28.replace("definately", "definitely").replace("4 April", "5 April")),  # fix + one other character
    ("S28", S28.replace("definately", "definitely").replace("main hall", "main-hall")),
    ("S01", S01.replace("recieve", "receive").replace("our own", "our\u2011own")),  # fix + a U+2011 hyphen
    ("S01", S01.replace("recieve", "receive")[:-1] + "!"),  # fix + changed trailing punctuation
    ("S01", S01.replace("recieve", "receive") + " Thanks."),  # fix + trailing commentary
])
def test_a_quote_that_fixes_the_planted_error_is_corrected_whatever_else_changed(item, answer):
    v = score_response(ITEMS[item], answer)
    assert v.category == "rewritten"  # our own class: text nowhere in the document
    assert v.evidence["corrected_form_present"] and not v.evidence["planted_span_present"]
    for taxonomy in ("paper", "paper-period-truncated"):
        assert paper_class(v.category, v.sub_label, v.evidence, taxonomy) == "corrected"


def test_text_of_the_document_is_never_a_fix_and_a_kept_error_is_not_corrected():
    kept = score_response(ITEMS["S28"], S28.replace("4 April", "5 April"))  # one changed character, error kept
    assert (kept.category, kept.sub_label) == ("rewritten", "changed_character")
    assert paper_class(kept.category, kept.sub_label, kept.evidence) == "rewritten"
    part = score_response(ITEMS["S01"], S01[:40])  # a real prefix: truncated, nothing fixed
    assert paper_class(part.category, part.sub_label, part.evidence) == "truncated"


def test_no_answer_is_rewritten_in_the_paper_view():
    v = score_response(ITEMS["S01"], "<think>the sentence is the one about case numbers")  # trace never closed
    assert v.category == "no_answer" and paper_class(v.category, v.sub_label, v.evidence) == "rewritten"


def _row(item, answer, repeat=0):
    v = score_response(ITEMS[item], answer)
    return {"model_label": "m", "preset": "standard", "arm": "plain", "item_id": item, "repeat": repeat,
            "category": v.category, "sub_label": v.sub_label, "dirty": ITEMS[item].dirty, "gold": ITEMS[item].gold,
            "evidence": v.evidence, "temperature": 1.0, "sampling": "paper"}


def test_corrected_dirty_and_the_spread_use_the_taxonomy():
    fixed = S28.replace("definately", "definitely").replace("4 April", "5 April")
    normalised = S01.replace(" ", "  ", 1)  # whitespace: the paper's faithful, not byte-identical
    rows = [_row("S28", fixed, 0), _row("S01", normalised, 0), _row("S28", S28, 1), _row("S01", S01, 1)]
    ours, paper = summarise(rows), summarise(rows, taxonomy="paper")
    (o,), (p,) = ours["rates"], paper["rates"]
    assert (o["corrected"], o["dirty_n"]) == (0, 4) and (p["corrected"], p["dirty_n"]) == (1, 4)
    assert o["repeat_rates"] == [0.0, 1.0] and p["repeat_rates"] == [0.5, 1.0]  # byte-identical vs exact-or-normalised
    assert ours["spread_faithful"] == "byte-identical"
    assert paper["spread_faithful"] == "the paper's headline faithful: exact or the normalised match"
    assert paper["corrected_counts"] == "the paper's corrected"
    assert any("no_answer" in n and "counts as rewritten" in n for n in paper["notes"]) and ours["notes"] == []
    json.dumps(paper)  # tables.json holds all of it


def test_quote_score_cli_gives_the_paper_class(tmp_path, tb_inprocess):
    fixed = S28.replace("definately", "definitely").replace("4 April", "5 April")
    cut = "The extended battery delivers a full two-shift day."
    src = tmp_path / "responses.jsonl"
    src.write_text("".join(json.dumps({"item_id": i, "response": r}) + "\n"
                           for i, r in (("S28", fixed), ("S26", cut), ("S01", ""))))
    out = {}
    for taxonomy in ("paper", "paper-period-truncated"):
        proc = tb_inprocess("quote", "score", str(src), "--taxonomy", taxonomy)
        assert proc.returncode == 0, proc.stderr
        out[taxonomy] = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [v["paper_class"] for v in out["paper"]] == ["corrected", "rewritten", "rewritten"]
    assert [v["paper_class"] for v in out["paper-period-truncated"]] == ["corrected", "truncated", "rewritten"]
    assert out["paper"][0]["category"] == "rewritten" and out["paper"][0]["taxonomy"] == "paper"
