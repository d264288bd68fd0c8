"""IFEval through the pinned if-verifiable checkers; our loop agrees with the package's own."""

from __future__ import annotations

import pytest

pytest.importorskip("if_verifiable", reason="if-verifiable is in the bench extra (pip install tamperbench[bench])")

from tamperbench.tasks.scoring.ifeval import INSTRUCTION_IDS, check  # noqa: E402


def _punkt_available() -> bool:
    import nltk

    try:
        nltk.data.find("tokenizers/punkt/english.pickle")
    except LookupError:
        return False
    return True


def test_our_id_list_is_the_registry():
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT

    assert set(INSTRUCTION_IDS) == set(INSTRUCTION_DICT) and len(INSTRUCTION_IDS) == 25


CASES = [
    ("Write it.", ("keywords:existence",), ({"keywords": ["puddle", "cloud"]},), "A puddle under a cloud."),
    ("Write it.", ("keywords:existence",), ({"keywords": ["puddle", "cloud"]},), "Only rain."),
    ("Write it.", ("length_constraints:number_words",), ({"relation": "less than", "num_words": 5},), "one two three"),
    ("Write it.", ("length_constraints:number_words",), ({"relation": "at least", "num_words": 5},), "one two three"),
    ("Write it.", ("detectable_format:json_format",), ({},), '```json\n{"a": 1}\n```'),
    ("Write it.", ("detectable_format:title",), ({},), "<<Rain>>\nIt rains."),
    ("Write it.", ("startend:end_checker",), ({"end_phrase": "Any other questions?"},), "Done. Any other questions?"),
    ("Write it.", ("change_case:english_capital",), ({},), "THIS IS ALL IN CAPITAL LETTERS IN ENGLISH"),
    ("Write it.", ("detectable_content:postscript",), ({"postscript_marker": "P.S."},), "Hi.\n\nP.S. bye"),
]


@pytest.mark.parametrize("prompt,ids,kwargs,response", CASES)
def test_agrees_with_the_package_loop(prompt, ids, kwargs, response):
    from if_verifiable.common import evaluate_instructions
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT

    ours = check(prompt, ids, kwargs, response)
    results, scores = evaluate_instructions(response=response, instruction_id_list=list(ids),
                                            kwargs_list=list(kwargs), prompt=prompt,
                                            instruction_registry=INSTRUCTION_DICT)
    assert ours["strict"] == [r.strict_pass for r in results]
    assert ours["loose"] == [r.loose_pass for r in results]
    assert float(ours["prompt_strict"]) == scores.binary_strict


def test_hand_checked_verdicts():
    assert check("p", ("keywords:existence",), ({"keywords": ["puddle"]},), "a puddle")["prompt_strict"] is True
    assert check("p", ("punctuation:no_comma",), ({},), "a, b")["prompt_strict"] is False
    assert check("p", ("punctuation:no_comma",), ({},), "")["prompt_strict"] is False  # empty reply fails


def test_sentence_count_needs_punkt_and_says_so():
    """number_sentences uses NLTK punkt data; without it the verdict is None with a note, never a guess."""
    result = check("p", ("length_constraints:number_sentences",), ({"relation": "less than", "num_sentences": 3},),
                   "One. Two.")
    if _punkt_available():
        assert result["prompt_strict"] is True and not result["notes"]
    else:
        assert result["strict"] == [None] and result["prompt_strict"] is None
        assert "unscorable" in result["notes"][0]
    # a failing instruction beside an unscorable one still fails the prompt
    mixed = check("p", ("length_constraints:number_sentences", "punctuation:no_comma"),
                  ({"relation": "less than", "num_sentences": 3}, {}), "One, two.")
    assert mixed["prompt_strict"] is False
