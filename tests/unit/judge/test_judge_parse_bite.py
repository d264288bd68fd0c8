"""The verdict parser's pieces pinned exactly: object spans, quote and escape handling, the
Python-to-JSON repair, confidence bounds, key normalisation and the error texts that are stored."""

from __future__ import annotations

import json
import math

import pytest

from tamperbench.judge.parse import _coerce_confidence, _load_object, _to_json, balanced_objects, parse_verdict

ALL = '"flagged": true, "corrected": false, "derailed": false, "aware": true'


@pytest.mark.parametrize("text, spans", [
    ('a{"x": 1}b{}', [(1, 9), (10, 12)]),
    ('{"x": "}"}', [(0, 10)]),                 # a brace inside a string does not close
    ("{'x': '}'}", [(0, 10)]),
    ('{"x": "\\"}"}', [(0, 12)]),              # an escaped quote does not end the string
    ('{"a": {"b": {}}} {', [(0, 16)]),         # nesting; an unclosed brace at the end is skipped
    ("{ oops {\"a\": 1}", [(7, 15)]),           # an unclosed start is retried one character later
    ("don't {x} ok", [(6, 9)]),                # an apostrophe between letters is prose
    ("{it's: 1}", [(0, 9)]),
    ("{'a\n': 1} {\"b\": 2}", [(10, 18)]),  # a ' string cannot span lines: that start gives up
    ("no braces", []),
    ("}{", []),
])
def test_balanced_object_spans(text, spans):
    assert balanced_objects(text) == spans


def test_python_literals_and_repairs_become_json():
    assert json.loads(_to_json("{'a': True, 'b': False, 'c': None, 'd': [1, 2,],}")) == \
        {"a": True, "b": False, "c": None, "d": [1, 2]}
    assert json.loads(_to_json("{'q': 'it\\'s \"x\"', 'n': 'a\\nb'}")) == {"q": "it's \"x\"", "n": "a\nb"}
    assert json.loads(_to_json('{"k": "\\\\"}')) == {"k": "\\"}
    assert _to_json("{'a': 'True'}") == '{"a": "True"}'  # words inside strings are left alone
    assert _to_json("[1 , ]") == "[1  ]"  # the trailing comma goes, the spaces stay


def test_load_object_tries_json_then_repair_then_literal_and_wants_a_dict():
    assert _load_object('{"a": 1}') == {"a": 1}
    assert _load_object("{'a': True,}") == {"a": True}
    assert _load_object("{1: 'x'}") == {1: "x"}          # only ast.literal_eval reads int keys
    assert _load_object("{'a'}") is None                 # a set, not a dict
    assert _load_object("{not python}") is None


@pytest.mark.parametrize("value, want", [
    (0.25, 0.25), ("0.75", 0.75), (1, 1.0), (0, 0.0), (1.0, 1.0),
    (True, None), (False, None), (1.0001, None), (-0.0001, None), (float("nan"), None), ("inf", None),
    ("high", None), (None, None), ([0.5], None),
])
def test_confidence_must_be_a_finite_number_in_0_1(value, want):
    got = _coerce_confidence(value)
    assert got == want and (want is None) == (got is None)
    if got is not None:
        assert isinstance(got, float) and not math.isnan(got)


def test_keys_are_read_case_and_space_insensitively_and_rationale_must_be_text():
    v = parse_verdict('{" Flagged ": true, "CORRECTED": false, "derailed": false, "Aware": true, "rationale": 5}')
    assert v.status == "parsed" and v.labels == {"flagged": True, "corrected": False, "derailed": False,
                                                 "aware": True}
    assert v.rationale is None and v.confidence is None and v.error is None


def test_error_texts_are_exact():
    assert parse_verdict("nothing").error == "no JSON object with a label found"
    assert parse_verdict('{"note": 1}').error == "no JSON object with a label found"  # no label key: skipped
    fake = "{" + ALL + "}"
    v = parse_verdict(f"{fake} and {fake}", reply=f"text {fake}")
    assert v.status == "unparsed"
    assert v.error == "no JSON object with a label found (2 object(s) skipped as echoed from the judged reply)"
    assert parse_verdict(fake, reply="").status == "parsed"  # an empty reply echoes nothing
    p = parse_verdict('{"flagged": true, "aware": "?"}')
    assert p.error == "labels missing or not boolean: ['corrected', 'derailed', 'aware']"
    assert p.n_labels == 1


def test_unreadable_object_before_the_verdict_is_skipped():
    v = parse_verdict('{"flagged": tru} then {' + ALL + ', "confidence": "0.5"}')
    assert v.status == "parsed" and v.labels["aware"] is True and v.confidence == 0.5


def test_to_json_edges_of_strings_and_escapes():
    assert _to_json("{X: 1}") == "{X: 1}"                       # only ' and " open strings
    assert _to_json("{'abc") == '{"abc"'                        # an unclosed string ends the text, no crash
    assert _to_json("'ab\\") == '"ab\\\\"'                      # a backslash as the very last character
    assert _to_json("'a\\'") == '"a\'"'                         # escaped quote right before the end
    assert _to_json("'a\\Xb'") == '"a\\\\Xb"'                   # an unknown escape is kept as written
    assert json.loads(_to_json("'a\"b\\n'")) == 'a"b\n'         # a " inside '...' and a real \n escape
    assert parse_verdict("{'flagged': 'yes', 'rationale': 'ab\\").status == "unparsed"  # never raises


def test_to_json_commas_only_dropped_before_a_closer():
    assert _to_json("[1,") == "[1," and _to_json("[1,  ") == "[1,  "  # a comma at the very end stays, no crash
    assert _to_json("[1,X]") == "[1,X]" and _to_json("[1, 2]") == "[1, 2]"
    assert _to_json("{'a': 1 ,\n }") == '{"a": 1 \n }'
