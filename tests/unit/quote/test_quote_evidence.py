"""The linear-time evidence (suffix automaton) equals difflib's block; the fast normalise equals the mapped one;
``quote score`` caps a response's size and reads files as bytes."""

from __future__ import annotations

import difflib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tamperbench.errors import UserError
from tamperbench.quote import score_file
from tamperbench.quote.evidence import longest_match
from tamperbench.quote.items import items_by_id
from tamperbench.quote.normalise import normalise, normalise_with_map

SMALL = st.text(alphabet="ab c.", max_size=40)


@settings(max_examples=400, deadline=None)
@given(SMALL, SMALL)
def test_longest_match_is_difflibs_block(doc, resp):
    """difflib (independent implementation) is the reference, tie-breaking included."""
    ref = difflib.SequenceMatcher(None, doc, resp, autojunk=False).find_longest_match(0, len(doc), 0, len(resp))
    got = longest_match(doc, resp)
    assert got.size == ref.size
    if ref.size:
        assert (got.a, got.b) == (ref.a, ref.b)


def test_longest_match_by_hand():
    assert tuple(longest_match("the cat sat", "a cat sat on")) == (3, 1, 8)  # " cat sat"
    assert tuple(longest_match("abab", "b")) == (1, 0, 1)  # earliest in the document
    assert longest_match("abc", "xyz").size == 0


SPACES = " \t\n\r\x0b\x0c\x1c\x85\xa0\u2000\u2028\u3000\u200b\ufeff"
QUOTES_DASHES = "\u2018\u2019\u201c\u201d\u2013\u2014\u2212\u2011"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(SPACES + QUOTES_DASHES + "ab'\"-")) | st.characters(), max_size=30))
def test_fast_normalise_equals_the_mapped_one(text):
    assert normalise(text) == normalise_with_map(text)[0]


def test_response_over_the_cap_is_reported_and_skipped(monkeypatch):
    gold = items_by_id()["S02"].gold
    cap = len(gold)  # the gold itself fits exactly; one character more does not
    monkeypatch.setattr(score_file, "MAX_RESPONSE_CHARS", cap)
    lines = [json.dumps({"item_id": "S02", "response": gold + "x"}), json.dumps({"item_id": "S02", "response": gold})]
    verdicts, problems, skipped = score_file.score_lines(lines)
    assert [v["line"] for v in verdicts] == [2] and skipped == 1
    assert problems == [(1, f"response of {cap + 1:,} characters is longer than the {cap:,} limit; line skipped")]


def test_line_over_the_cap_is_skipped_before_parsing(monkeypatch):
    monkeypatch.setattr(score_file, "MAX_LINE_CHARS", 10)
    _, problems, skipped = score_file.score_lines(['{"item_id": "S02", "response": "long"}'])
    assert skipped == 1 and "line longer than 10 characters" in problems[0][1]


def test_lone_surrogate_is_a_bad_line():
    _, problems, skipped = score_file.score_lines(['{"item_id": "S02", "response": "a\\ud800b"}'])
    assert skipped == 1 and "unpaired surrogate" in problems[0][1]


def test_files_are_read_as_utf8_bytes(tmp_path):
    ok = tmp_path / "ok.jsonl"
    ok.write_bytes(b'\xef\xbb\xbf{"a": "x\xe2\x80\xa8y"}\r\n{"b": 1}\n')  # BOM, CRLF, raw U+2028 in a string
    assert score_file.read_lines(ok) == ['{"a": "x\u2028y"}', '{"b": 1}', ""]
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"r": "ok"}\n{"r": "caf\xe9"}\n')
    with pytest.raises(UserError, match=r"latin.jsonl: line 2 is not UTF-8 text \(byte 0xe9 at column 11\)"):
        score_file.read_lines(latin)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(UserError, match="binary data"):
        score_file.read_lines(binary)
    with pytest.raises(UserError, match="is a directory"):
        score_file.read_lines(tmp_path)
