"""The Exact Words scorer on answers of known class (``quote.controls``): on every preset, the gold copied is
faithful, the planted error repaired is corrected, the gold's first half is truncated, and the gold run on into
the next sentence is a wrong span, under our taxonomy and the paper's. A table of zero faithful quotes from a
model that cannot copy means something only beside these."""

from __future__ import annotations

import pytest

from tamperbench.quote.controls import EXPECTED, reference_answers, score_controls
from tamperbench.quote.items import document_for, load_items

PRESETS = ("standard", "depth", "colon", "code")


@pytest.mark.parametrize("preset", PRESETS)
def test_every_reference_answer_lands_in_its_class(preset):
    rows = score_controls(preset, "paper")
    assert set(rows) == set(EXPECTED)
    for name, r in rows.items():
        assert r["hits"] == r["n"] and r["hits_paper"] == r["n"], (name, r["ours"], r["paper"])
        assert r["ours"] == {EXPECTED[name][0]: r["n"]}
    items = load_items(preset)
    assert rows["copier"]["n"] == rows["truncator"]["n"] == len(items)
    assert rows["corrector"]["n"] == sum(it.dirty for it in items)


def test_reference_answers_come_from_the_item_and_its_document():
    for item in load_items("standard"):
        answers = reference_answers(item)
        doc = document_for(item).text
        assert answers["copier"] == item.gold
        assert ("corrector" in answers) == item.dirty
        if "neighbour" in answers:
            assert answers["neighbour"] in doc and answers["neighbour"].startswith(item.gold)
            assert len(answers["neighbour"]) > len(item.gold) + 1
        assert item.gold.startswith(answers["truncator"]) and len(answers["truncator"]) < len(item.gold)


def test_the_page_prints_a_miss_as_a_miss():
    """The results page's table of the controls (tools/results_page.py): a control outside its class shows
    where it went, in the order of the answerers."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "tools" / "results_page.py"
    spec = importlib.util.spec_from_file_location("results_page_for_controls", path)
    assert spec and spec.loader
    page = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = page
    spec.loader.exec_module(page)
    rows = score_controls("standard", "paper")
    rows["neighbour"] = {**rows["neighbour"], "hits": 33, "ours": {"wrong_span": 33, "rewritten": 3}}
    text = "\n".join(page._quote_controls({"standard": rows}))
    lines = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| Answerer")]
    assert [line.split(" | ")[0][2:] for line in lines] == ["copier", "corrector", "truncator", "neighbour"]
    assert lines[3].endswith("| 33 of 36 | 36 of 36 | rewritten 3 |")
