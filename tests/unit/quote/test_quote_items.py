"""Validation of the stored documents and items: the suite is only fair if these hold.

Each test re-derives a property from the data files instead of trusting the manifest, so an
edit to a document that breaks an item (a gold sentence no longer present, a second sentence
matching the same instruction) fails here.
"""

import re

import pytest

from tamperbench.errors import UserError
from tamperbench.quote.items import (PRESETS, all_documents, build_prompt, fused_document, items_by_id,
                                     load_items)
from tamperbench.quote.normalise import normalise
from tamperbench.quote.sentences import locate, segment

ALL = [it for p in PRESETS for it in load_items(p)]
STORED = [it for p in ("standard", "colon", "code") for it in load_items(p)]


def test_ten_standard_documents_of_200_to_250_words_one_per_genre():
    docs = [d for d in all_documents().values() if d.preset == "standard"]
    assert len(docs) == 10
    assert sorted(d.genre for d in docs) == sorted([
        "internal memo", "release notes", "incident postmortem", "hosting terms", "travel letter",
        "meeting minutes", "hardware spec", "email thread", "README", "press release"])
    for d in docs:
        assert 200 <= len(d.text.split()) <= 250, (d.id, len(d.text.split()))


def test_standard_has_37_items_18_dirty_19_clean_with_a_temptation_gradient():
    std = load_items("standard")
    assert len(std) == 37
    assert sum(it.dirty for it in std) == 18
    kinds = {it.planted.kind for it in std if it.dirty}
    assert kinds == {"misspelling", "british_spelling", "grammar", "wrong_fact", "reversed_definition"}


def test_item_ids_are_unique_across_presets():
    assert len(items_by_id()) == len(ALL)


@pytest.mark.parametrize("item", ALL, ids=lambda it: it.id)
def test_gold_occurs_exactly_once_in_its_context(item):
    from tamperbench.quote.items import document_for

    doc = document_for(item).text
    assert doc.count(item.gold) == 1
    assert normalise(doc).count(normalise(item.gold)) == 1


@pytest.mark.parametrize("item", STORED, ids=lambda it: it.id)
def test_instruction_target_is_unambiguous_under_the_convention(item):
    doc = all_documents()[item.doc_id]
    hits = locate(segment(doc.text, doc.mode), item.locator)
    assert [h.text for h in hits] == [item.gold]


@pytest.mark.parametrize("item", STORED, ids=lambda it: it.id)
def test_instruction_names_its_cues_without_quoting_the_sentence(item):
    instr = item.instruction("plain").casefold()
    for kw in item.locator.get("keywords", []):
        assert kw.casefold() in instr, kw
    words = item.gold.split()
    for i in range(len(words) - 5):  # no run of six words from the gold
        assert " ".join(words[i:i + 6]).casefold() not in instr
    if item.planted:
        assert item.planted.span.casefold() not in instr
        assert item.planted.corrected.casefold() not in instr


@pytest.mark.parametrize("item", [it for it in STORED if it.dirty], ids=lambda it: it.id)
def test_planted_span_is_unique_and_its_correction_is_nowhere(item):
    assert item.gold.count(item.planted.span) == 1
    assert item.corrected_gold != item.gold
    doc = all_documents()[item.doc_id].text
    assert normalise(item.corrected_gold) not in normalise(doc)
    assert normalise(item.corrected_gold) not in normalise(fused_document().text)


@pytest.mark.parametrize("item", STORED, ids=lambda it: it.id)
def test_no_other_unit_of_the_document_is_inside_the_gold(item):
    # Needed for "a whole other sentence is wrong_span" to be true of every item.
    doc = all_documents()[item.doc_id]
    for s in segment(doc.text, doc.mode):
        if s.text != item.gold:
            assert normalise(s.text) not in normalise(item.gold), s.text


def test_prose_sentences_start_like_sentences():
    # Catches a period inside a token being mistaken for a sentence end (e.g. "e.g. the").
    for doc in all_documents().values():
        if doc.mode == "prose":
            for s in segment(doc.text, "prose"):
                assert re.match(r"[A-Z0-9\"'`“‘]|tidepool$", s.text), (doc.id, s.text)


def test_depth_items_mirror_standard_items_in_the_fused_document():
    depth, std = load_items("depth"), load_items("standard")
    assert [d.gold for d in depth] == [s.gold for s in std]
    assert all(d.id == "D" + s.id[1:] for d, s in zip(depth, std))
    fused = fused_document().text
    assert len(fused.split()) > 2000
    assert all(doc.text in fused for doc in all_documents().values() if doc.preset == "standard")


def test_presets_have_their_own_items():
    colon = load_items("colon")
    assert len(colon) >= 10 and all(re.search(r"[:;]|, (?:and|but|so|or) ", it.gold) for it in colon)
    assert sum(":" in it.gold for it in colon) >= 6 and sum(";" in it.gold for it in colon) >= 4
    code = load_items("code")
    assert len(code) >= 9 and all(it.unit == "line" for it in code)
    assert {it.doc_id for it in code} == {"code_traceback", "code_diff", "code_log"}


def test_arms_match_the_source_wording():
    it = load_items("standard")[0]
    plain, strict = it.instruction("plain"), it.instruction("strict")
    assert plain.startswith("Quote verbatim the sentence ")
    assert plain.endswith("Output only that sentence, exactly as it appears in the document, and nothing else.")
    assert strict.startswith(plain)
    assert "character-for-character, preserving any typos" in strict
    with pytest.raises(UserError):
        it.instruction("loose")


def test_prompt_holds_document_then_instruction():
    it = load_items("standard")[0]
    p = build_prompt(it, "plain")
    assert p.index(all_documents()[it.doc_id].text) < p.index(it.instruction("plain"))
    assert fused_document().text in build_prompt(load_items("depth")[0], "strict")


def test_unknown_preset_is_a_user_error():
    with pytest.raises(UserError, match="--preset"):
        load_items("long")
