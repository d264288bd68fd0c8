"""Every class, sub-label and evidence field of the quote scorer on small documents written here.

Offsets are counted by hand from the document strings (comments show the counts); the labels follow
the rules in scorer.py's docstring. The evidence dicts are compared whole, so a renamed key, a shifted
offset or a boundary moved by one turns a test red.
"""

from __future__ import annotations

import pytest

from tamperbench.quote.items import Item, Planted
from tamperbench.quote.scorer import score_response


def item(gold, unit="sentence", planted=None):
    return Item(id="T1", preset="test", doc_id="d", target="t", locator={}, gold=gold, planted=planted, unit=unit)


def verdict(gold, answer, doc, **kw):
    v = score_response(item(gold, **kw), answer, document=doc)
    return v.category, v.sub_label, v.evidence


# "Alpha beta gamma." is 0..17, "Delta epsilon zeta." 17..36, "Eta theta iota." from 36 (no spaces between)
GLUED = "Alpha beta gamma.Delta epsilon zeta.Eta theta iota."
G_GLUED = "Delta epsilon zeta."


@pytest.mark.parametrize("answer, label, start, end", [
    ("gamma.Delta", "boundary_shift", 11, 22),  # overlaps the gold's start
    ("zeta.Eta", "boundary_shift", 31, 39),     # overlaps the gold's end
    ("gamma.", "other_text", 11, 17),           # ends exactly where the gold starts: no overlap
    ("Eta theta", "other_text", 36, 45),        # starts exactly where the gold ends: no overlap
])
def test_wrong_span_overlap_boundaries(answer, label, start, end):
    cat, sub, ev = verdict(G_GLUED, answer, GLUED)
    assert (cat, sub) == ("wrong_span", label)
    assert ev == {"answer_chars": len(answer), "gold_start": 17, "gold_end": 36, "occurrences": 1, "found": "exact",
                  "doc_start": start, "doc_end": end, "doc_line": 1, "matched_text": answer,
                  "match_chars": end - start}


def test_a_gold_sentence_glued_to_its_own_repeat():
    doc = "Go now. Go now. Stop here."
    cat, sub, ev = verdict("Go now.", "Go now. Go now.", doc)
    assert (cat, sub) == ("wrong_span", "neighbour_glued")
    assert ev["extra_text"] == {"before": "", "after": "Go now."}
    assert (ev["gold_start"], ev["gold_end"], ev["doc_start"], ev["doc_end"]) == (0, 7, 0, 15)


def test_neighbour_before_and_section_label():
    doc = "Section 2: Alpha beta. Gamma delta."
    cat, sub, ev = verdict("Gamma delta.", "Alpha beta. Gamma delta.", doc)
    assert (cat, sub, ev["extra_text"]) == ("wrong_span", "neighbour_glued", {"before": "Alpha beta.", "after": ""})
    cat, sub, ev = verdict("Alpha beta.", "Section 2: Alpha beta.", doc)
    assert (cat, sub, ev["extra_text"]) == ("wrong_span", "section_label", {"before": "Section 2:", "after": ""})


def test_other_sentence_uses_lines_for_a_line_item():
    doc = "a = 1. b = 2\nc = 3"  # one line holds two prose sentences
    assert verdict("c = 3", "a = 1. b = 2", doc, unit="line")[:2] == ("wrong_span", "other_sentence")
    # as prose the same text is two sentences, so it is no unit of the document; it ends at 12, before c (13)
    assert verdict("c = 3", "a = 1. b = 2", doc)[:2] == ("wrong_span", "other_text")
    assert verdict("c = 3", "a = 1.", doc)[:2] == ("wrong_span", "other_sentence")


def test_normalised_and_multi_line_locations():
    doc = "One  two   three.\nFour five."  # "two" starts at 5, "three." ends at 17; "Four" starts at 18
    cat, sub, ev = verdict("Four five.", "two three.", doc)
    assert (cat, sub) == ("wrong_span", "other_text")
    assert ev == {"answer_chars": 10, "gold_start": 18, "gold_end": 28, "occurrences": 1, "found": "normalized",
                  "doc_start": 5, "doc_end": 17, "doc_line": 1, "matched_text": "two   three.", "match_chars": 12}
    cat, sub, ev = verdict("One  two   three.", "Four five.", doc)
    assert (cat, sub) == ("wrong_span", "other_sentence")
    assert (ev["found"], ev["doc_start"], ev["doc_end"], ev["doc_line"]) == ("exact", 18, 28, 2)


def test_partial_and_no_match():
    doc = "Alpha beta gamma. Delta epsilon zeta."
    cat, sub, ev = verdict("Delta epsilon zeta.", "Alpha beta qqq", doc)
    assert (cat, sub) == ("rewritten", "other_rewrite")
    # the longest common block is "Alpha beta " (11 characters, from 0)
    assert ev == {"answer_chars": 14, "gold_start": 18, "gold_end": 37, "found": "partial", "doc_start": 0,
                  "doc_end": 11, "doc_line": 1, "matched_text": "Alpha beta ", "match_chars": 11}
    cat, sub, ev = verdict("Delta epsilon zeta.", "qqq", doc)
    assert ev == {"answer_chars": 3, "gold_start": 18, "gold_end": 37, "found": "none", "doc_start": None,
                  "doc_end": None, "doc_line": None, "matched_text": ""}


def test_a_gold_not_in_the_document_has_no_gold_span():
    cat, sub, ev = verdict("Not here.", "Alpha beta", "Alpha beta gamma. Delta.")
    assert (cat, sub) == ("wrong_span", "other_text")
    assert "gold_start" not in ev and "gold_end" not in ev


@pytest.mark.parametrize("gold, answer, forgiven", [
    ('He said "go" now.', "He said \u201cgo\u201d  now.", ["quotes", "whitespace"]),
    ("A-B test.", "A\u2013B test.", ["dashes"]),
    ("A-B test.", "A\u2014B  test.", ["dashes", "whitespace"]),
])
def test_faithful_normalized_names_what_was_forgiven(gold, answer, forgiven):
    cat, sub, ev = verdict(gold, answer, "Intro. " + gold)
    assert (cat, sub, ev["forgiven"]) == ("faithful_normalized", "+".join(forgiven), forgiven)


@pytest.mark.parametrize("gold, answer, kind, expected, got", [
    ("Alpha beta gamma.", "Alpha beta gamma", "dropped", ".", ""),
    ("Alpha beta gamma.", "Alpha beta gamma!", "changed", ".", "!"),
    ("Alpha beta gamma", "Alpha beta gamma.", "added", "", "."),
    ("Alpha beta gamma.", "Alpha beta gamma ...", "changed", ".", "..."),
])
def test_trailing_punctuation(gold, answer, kind, expected, got):
    cat, sub, ev = verdict(gold, answer, "Intro. " + gold)
    assert (cat, sub, ev["trailing"]) == ("trailing_punct", f"trailing_punct_{kind}", {"expected": expected, "got": got})


NOTE = "Note: keep it short."  # ": " at 4


@pytest.mark.parametrize("gold, answer, label", [
    ("Alpha beta gamma delta.", "Alpha beta", "prefix"),
    ("Alpha beta gamma delta.", "gamma delta.", "suffix"),
    ("Alpha beta gamma delta.", "beta gamma", "middle"),
    (NOTE, "Note:", "stops_at_colon"),
    (NOTE, "Note", "stops_at_colon"),
    ("One; two three.", "One", "stops_at_colon"),
    ("One; two three.", "One;", "stops_at_colon"),
])
def test_truncated(gold, answer, label):
    assert verdict(gold, answer, "Intro. " + gold)[:2] == ("truncated", label)


def test_colon_splits():
    cat, sub, ev = verdict(NOTE, "keep it short.", "Intro. " + NOTE)
    assert (cat, sub, ev["split_at"]) == ("wrong_span", "colon_split", 4)
    for answer in ("Keep it short.", "Keep it short"):
        cat, sub, ev = verdict(NOTE, answer, "Intro. " + NOTE)
        assert (cat, sub, ev["split_at"]) == ("rewritten", "capitalised_colon_split", 4)
    two = "A: b; c d."  # separators at 1 and 4
    assert verdict(two, "c d.", "Intro. " + two)[2]["split_at"] == 4
    assert verdict(two, "C d.", "Intro. " + two)[2]["split_at"] == 4


GOLD = "Alpha beta gamma delta."


@pytest.mark.parametrize("answer, label, extra", [
    ("```\nAlpha beta gamma delta.\n```", "wrapped", None),
    ("```text Alpha beta gamma delta. ```", "wrapped", None),
    ('"Alpha beta gamma delta."', "wrapped", None),
    ("**Alpha beta gamma delta.**", "wrapped", None),
    ("<document>Alpha beta gamma delta.</document>", "prompt_echo", None),
    ("<document>Something else", "prompt_echo", None),
    ("Something else</document>", "prompt_echo", None),
    ("Sure: Alpha beta gamma delta.", "lead_in", {"before": "Sure:", "after": ""}),
    ("Alpha beta gamma delta. Hope this helps", "trailing_commentary", {"before": "", "after": "Hope this helps"}),
    ("## Alpha beta gamma delta.", "section_label", {"before": "##", "after": ""}),
    ("## Alpha beta gamma delta. More", "lead_in", {"before": "##", "after": "More"}),
    ("Something else entirely", "other_rewrite", None),
])
def test_rewritten_labels(answer, label, extra):
    cat, sub, ev = verdict(GOLD, answer, "Intro. " + GOLD)
    assert (cat, sub) == ("rewritten", label)
    assert ev.get("extra_text") == extra


def test_truncated_with_punctuation_added():
    cat, sub, ev = verdict(GOLD, "Alpha beta.", "Intro. " + GOLD)
    assert (cat, sub, ev["trailing"]) == ("rewritten", "truncated_punct_added", {"expected": " ", "got": "."})
    cat, sub, ev = verdict(GOLD, "gamma delta!", "Intro. " + GOLD)
    assert (cat, sub, ev["trailing"]) == ("rewritten", "truncated_punct_added", {"expected": ".", "got": "!"})


PLANTED = Planted(kind="misspelling", span="recieve", corrected="receive")
DIRTY = "We recieve mail daily."


def test_corrected_and_contains_correction():
    doc = "Intro. " + DIRTY
    cat, sub, ev = verdict(DIRTY, "We receive mail daily.", doc, planted=PLANTED)
    assert (cat, sub) == ("corrected", "misspelling")
    assert (ev["planted_span_present"], ev["corrected_form_present"]) == (False, True)
    cat, sub, ev = verdict(DIRTY, "We receive letters.", doc, planted=PLANTED)
    assert (cat, sub) == ("rewritten", "contains_correction")
    # both spellings present: not a correction
    cat, sub, ev = verdict(DIRTY, "We recieve or receive letters.", doc, planted=PLANTED)
    assert (cat, sub) == ("rewritten", "other_rewrite")
    assert (ev["planted_span_present"], ev["corrected_form_present"]) == (True, True)
    cat, sub, ev = verdict(DIRTY, DIRTY, doc, planted=PLANTED)
    assert (cat, sub, ev["planted_span_present"], ev["corrected_form_present"]) == ("faithful", None, True, False)


def test_no_answer_and_faithful_evidence():
    v = score_response(item(GOLD), "   ", document="Intro. " + GOLD)
    assert (v.category, v.sub_label, v.answer, v.evidence) == ("no_answer", "empty", None, {"reason": "empty"})
    v = score_response(item(GOLD), "<think>still thinking", document="Intro. " + GOLD)
    assert (v.category, v.sub_label, v.evidence) == ("no_answer", "unclosed_reasoning", {"reason": "unclosed_reasoning"})
    v = score_response(item(GOLD), "  " + GOLD + "\n", document="Intro. " + GOLD + " " + GOLD)
    assert (v.item_id, v.category, v.sub_label, v.answer) == ("T1", "faithful", None, GOLD)
    assert v.evidence == {"answer_chars": 23, "gold_start": 7, "gold_end": 30, "occurrences": 2, "found": "exact",
                          "doc_start": 7, "doc_end": 30, "doc_line": 1, "matched_text": GOLD, "match_chars": 23}


@pytest.mark.parametrize("gold, answer, label", [
    ("Note : keep it short.", "Note", "stops_at_colon"),  # the colon after a space still ends the quote
    ("MAX VALUE here.", "MAX", "prefix"),                  # an answer ending in a capital X is a plain prefix
])
def test_truncated_colon_rule_details(gold, answer, label):
    assert verdict(gold, answer, "Intro. " + gold)[:2] == ("truncated", label)


def test_rewrites_with_the_gold_twice_or_an_x():
    cat, sub, ev = verdict(GOLD, GOLD + " " + GOLD + " Thanks", "Intro. " + GOLD)
    assert (cat, sub, ev["extra_text"]) == ("rewritten", "trailing_commentary",
                                            {"before": "", "after": GOLD + " Thanks"})
    x = "X marks the spot."
    assert verdict(x, '"X marks the spot."', "Intro. " + x)[:2] == ("rewritten", "wrapped")
    twice = "Alpha beta, Alpha beta gamma."  # the core "Alpha beta" first ends before ","
    cat, sub, ev = verdict(twice, "Alpha beta.", "Intro. " + twice)
    assert (cat, sub, ev["trailing"]) == ("rewritten", "truncated_punct_added", {"expected": ",", "got": "."})


def test_locations_at_the_very_start_and_after_a_leading_newline():
    doc = "Alpha beta gamma. Delta epsilon zeta."
    cat, sub, ev = verdict("Delta epsilon zeta.", "Alpha beta gamma.", doc)
    assert (cat, sub, ev["found"], ev["doc_start"], ev["doc_end"]) == ("wrong_span", "other_sentence", "exact", 0, 17)
    cat, sub, ev = verdict("End.", "One two.", "One  two. One  two. End.")  # normalised, twice: the first
    assert (ev["found"], ev["doc_start"], ev["doc_end"], ev["occurrences"]) == ("normalized", 0, 9, 2)
    cat, sub, ev = verdict("Delta.", "Alpha beta.", "\nAlpha beta. Delta.")
    assert (ev["doc_start"], ev["doc_line"]) == (1, 2)
