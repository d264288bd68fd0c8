"""Every class and near-miss sub-label of the scorer, on real items, with the evidence checked."""

import pytest

from tamperbench.quote.items import all_documents, items_by_id
from tamperbench.quote.scorer import CATEGORIES, score_response

ITEMS = items_by_id()


def verdict(item_id, response):
    return score_response(ITEMS[item_id], response)


def label(item_id, response):
    v = verdict(item_id, response)
    return v.category, v.sub_label


def test_faithful_is_byte_identical_and_evidence_points_at_the_sentence():
    item = ITEMS["S01"]
    v = verdict("S01", "\n  " + item.gold + "\n")
    assert (v.category, v.sub_label) == ("faithful", None)
    doc = all_documents()["memo"].text
    assert doc[v.evidence["doc_start"]:v.evidence["doc_end"]] == item.gold
    assert v.evidence["found"] == "exact" and v.evidence["occurrences"] == 1
    assert v.evidence["doc_line"] == doc[:v.evidence["doc_start"]].count("\n") + 1
    assert v.evidence["planted_span_present"] is True and v.evidence["corrected_form_present"] is False


@pytest.mark.parametrize("item_id, old, new, forgiven", [
    ("S04", "vendor's", "vendor\u2019s", "quotes"),
    ("S35", "\u2014", "-", "dashes"),
    ("S35", "\u2014", "\u2013", "dashes"),
    ("S02", "the order number", "the  order\u00a0number", "whitespace"),
])
def test_faithful_normalized_forgives_only_quotes_dashes_whitespace(item_id, old, new, forgiven):
    v = verdict(item_id, ITEMS[item_id].gold.replace(old, new))
    assert (v.category, v.sub_label) == ("faithful_normalized", forgiven)
    assert v.evidence["forgiven"] == [forgiven]
    assert v.evidence["found"] == "normalized"


def test_non_breaking_hyphen_is_not_forgiven_it_is_a_changed_character():
    gold = ITEMS["S27"].gold
    v = verdict("S27", gold.replace("hot-swappable", "hot\u2011swappable"))
    assert (v.category, v.sub_label) == ("rewritten", "changed_character")
    assert v.evidence["changed_chars"] == [{"at": gold.index("-"), "expected": "U+002D '-'",
                                            "got": "U+2011 '\u2011'"}]


@pytest.mark.parametrize("item_id", ["S01", "S08", "S16", "S20", "S36", "K04"])
def test_corrected_when_only_the_planted_error_is_repaired(item_id):
    item = ITEMS[item_id]
    v = verdict(item_id, item.corrected_gold)
    assert (v.category, v.sub_label) == ("corrected", item.planted.kind)
    assert v.evidence["planted_span_present"] is False and v.evidence["corrected_form_present"] is True


def test_trailing_punct_is_its_own_class():
    g = ITEMS["S02"].gold
    assert label("S02", g[:-1]) == ("trailing_punct", "trailing_punct_dropped")
    assert label("S02", g[:-1] + "!") == ("trailing_punct", "trailing_punct_changed")
    assert label("K01", ITEMS["K01"].gold + ";") == ("trailing_punct", "trailing_punct_added")
    assert verdict("S02", g[:-1] + "!").evidence["trailing"] == {"expected": ".", "got": "!"}


def test_truncated_sub_labels():
    g = ITEMS["S15"].gold
    assert label("S15", g[:30]) == ("truncated", "prefix")
    assert label("S15", "we will delete it permanently.") == ("truncated", "suffix")
    assert label("S15", g[10:40]) == ("truncated", "middle")
    assert label("S01", "But a part of it is our own doing:") == ("truncated", "stops_at_colon")
    assert label("S01", "But a part of it is our own doing") == ("truncated", "stops_at_colon")


def test_wrong_span_sub_labels():
    memo = ITEMS["S01"].gold
    prev = "Some of that rise comes from the new payment provider, whose partial-refund screen is " \
           "confusing and which we have reported to them twice."
    assert label("S01", memo.split(": ", 1)[1]) == ("wrong_span", "colon_split")
    assert label("S01", prev + " " + memo) == ("wrong_span", "neighbour_glued")
    assert label("S12", "4.2 " + ITEMS["S12"].gold) == ("wrong_span", "section_label")
    assert label("S17", "Some trips end with a landmark.") == ("wrong_span", "other_sentence")
    assert label("S02", "before the refund is released. This adds about four minutes") == ("wrong_span", "boundary_shift")
    assert label("S02", "the new payment provider") == ("wrong_span", "other_text")
    v = verdict("S17", "Some trips end with a landmark. " + ITEMS["S17"].gold)
    assert v.category == "wrong_span" and v.evidence["extra_text"]["before"] == "Some trips end with a landmark."


def test_rewritten_sub_labels():
    g = ITEMS["S14"].gold
    assert label("S14", f'"{g}"') == ("rewritten", "wrapped")
    assert label("S14", f"```\n{g}\n```") == ("rewritten", "wrapped")
    assert label("S14", "4.3 " + g) == ("rewritten", "section_label")
    assert label("S14", "Section 4.3: " + g) == ("rewritten", "section_label")
    assert label("S14", "The sentence is: " + g) == ("rewritten", "lead_in")
    assert label("S14", g + " This is the second sentence of 4.3.") == ("rewritten", "trailing_commentary")
    colon_start = ITEMS["S01"].gold.split(": ", 1)[1]
    assert label("S01", colon_start[0].upper() + colon_start[1:]) == ("rewritten", "capitalised_colon_split")
    assert label("S26", "The extended battery delivers a full two-shift day.") == ("rewritten", "truncated_punct_added")
    assert label("S20", "She said the new flow is simpler than the old one.") == ("rewritten", "contains_correction")
    assert label("S01", "Customers get two case numbers.") == ("rewritten", "other_rewrite")
    assert label("S17", "Lena\n</document>") == ("rewritten", "prompt_echo")
    assert label("S17", "<document>\n" + ITEMS["S17"].gold) == ("rewritten", "prompt_echo")
    v = verdict("S01", "Customers get two case numbers.")
    assert v.evidence["found"] == "partial" and v.evidence["matched_text"] in all_documents()["memo"].text


def test_no_answer_and_reasoning_blocks():
    g = ITEMS["S03"].gold
    assert label("S03", "") == ("no_answer", "empty")
    assert label("S03", "  \n") == ("no_answer", "empty")
    assert label("S03", "<think>I should quote it") == ("no_answer", "unclosed_reasoning")
    assert label("S03", "<think>only thoughts</think>") == ("no_answer", "empty")
    assert label("S03", f"<think>the sentence about merged cases</think>\n{g}") == ("faithful", None)
    assert label("S03", f"I looked.</think>{g}") == ("faithful", None)


def test_depth_items_are_scored_against_the_fused_document():
    g = ITEMS["D17"].gold
    assert label("D17", g) == ("faithful", None)
    v = verdict("D17", "Some trips end with a landmark.")
    assert v.category == "wrong_span"
    from tamperbench.quote.items import fused_document

    fused = fused_document().text
    assert fused[v.evidence["doc_start"]:v.evidence["doc_end"]] == "Some trips end with a landmark."
    assert v.evidence["doc_line"] > 50  # the letter is the fifth document of the fused context


def test_every_category_is_reachable_here():
    seen = {verdict(i, r).category for i, r in [
        ("S02", ITEMS["S02"].gold), ("S04", ITEMS["S04"].gold.replace("'", "\u2019")),
        ("S01", ITEMS["S01"].corrected_gold), ("S02", ITEMS["S02"].gold[:-1]), ("S02", ITEMS["S02"].gold[:20]),
        ("S02", "the new payment provider"), ("S02", "zzz"), ("S02", "")]}
    assert seen == set(CATEGORIES)
