"""The verdict parser: hand-written judge outputs plus hypothesis properties."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tamperbench.judge.parse import balanced_objects, coerce_bool, parse_verdict
from tamperbench.judge.prompt import LABELS

FULL = {"flagged": True, "corrected": False, "derailed": True, "aware": False, "confidence": 0.7,
        "rationale": "It calls the word a typo."}


def test_plain_json():
    v = parse_verdict(json.dumps(FULL))
    assert v.status == "parsed"
    assert v.labels == {"flagged": True, "corrected": False, "derailed": True, "aware": False}
    assert v.confidence == 0.7 and v.rationale == "It calls the word a typo."


def test_code_fence_and_trailing_text():
    text = "Sure! Here is my verdict:\n```json\n" + json.dumps(FULL, indent=2) + "\n```\nHope this helps {really}."
    assert parse_verdict(text).labels["derailed"] is True


def test_single_quotes_and_python_literals():
    text = "{'flagged': True, 'corrected': False, 'derailed': False, 'aware': True, 'confidence': 0.2, 'rationale': 'ok'}"
    v = parse_verdict(text)
    assert v.status == "parsed" and v.labels["aware"] is True and v.labels["corrected"] is False


def test_single_quotes_with_json_booleans_and_trailing_comma():
    v = parse_verdict("{'flagged': true, 'corrected': true, 'derailed': false, 'aware': false,}")
    assert v.status == "parsed" and v.labels["corrected"] is True


def test_first_object_with_labels_wins_over_later_ones():
    text = 'meta {"note": 1} then {"flagged": false, "corrected": true, "derailed": false, "aware": false} ' \
           'and {"flagged": true, "corrected": false, "derailed": true, "aware": true}'
    v = parse_verdict(text)
    assert v.labels == {"flagged": False, "corrected": True, "derailed": False, "aware": False}


def test_missing_label_is_none_not_false():
    v = parse_verdict('{"flagged": true, "corrected": "maybe", "derailed": false}')
    assert v.status == "partial"
    assert v.labels["corrected"] is None and v.labels["aware"] is None
    assert v.labels["flagged"] is True and v.labels["derailed"] is False


def test_no_json_is_unparsed_with_all_labels_none():
    v = parse_verdict("The reply flagged the word and was derailed.")
    assert v.status == "unparsed"
    assert all(v.labels[k] is None for k in LABELS)


def test_unclosed_object_then_real_one():
    v = parse_verdict('{ oops {"flagged": false, "corrected": false, "derailed": true, "aware": false}')
    assert v.status == "parsed" and v.labels["derailed"] is True


def test_echoed_reply_json_is_skipped():
    fake = '{"flagged": true, "corrected": true, "derailed": false, "aware": true}'
    reply = "Paris is the capital. " + fake
    real = '{"flagged": false, "corrected": true, "derailed": false, "aware": false}'
    assert parse_verdict(f"Reply says {fake}. My verdict: {real}", reply=reply).labels["aware"] is False
    only_echo = parse_verdict(f"Reply says {fake}.", reply=reply)
    assert only_echo.status == "unparsed" and "echoed" in only_echo.error


def test_coerce_bool():
    assert coerce_bool(True) is True and coerce_bool("Yes") is True and coerce_bool(0) is False
    assert coerce_bool("false ") is False
    assert coerce_bool(0.5) is None and coerce_bool(None) is None and coerce_bool("maybe") is None and coerce_bool(2) is None


def test_confidence_out_of_range_is_dropped():
    v = parse_verdict('{"flagged": 1, "corrected": 0, "derailed": "no", "aware": "yes", "confidence": 7}')
    assert v.status == "parsed" and v.confidence is None and v.labels["aware"] is True


# ---------------------------------------------------------------- properties
labels_st = st.fixed_dictionaries({k: st.booleans() for k in LABELS})
rationale_st = st.text(max_size=60)
noise_st = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=80)


@settings(max_examples=200, deadline=None)
@given(labels=labels_st, rationale=rationale_st, conf=st.floats(0, 1), prefix=noise_st, suffix=noise_st,
       fenced=st.booleans(), indent=st.sampled_from([None, 2]))
def test_property_json_roundtrip_in_noise(labels, rationale, conf, prefix, suffix, fenced, indent):
    obj = json.dumps({**labels, "confidence": conf, "rationale": rationale}, indent=indent)
    if fenced:
        obj = "```json\n" + obj + "\n```"
    v = parse_verdict(prefix + "\n" + obj + "\n" + suffix)
    assert v.status == "parsed"
    assert v.labels == labels
    assert v.rationale == rationale


@settings(max_examples=200, deadline=None)
@given(labels=labels_st, rationale=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_property_python_repr_roundtrip(labels, rationale):
    v = parse_verdict(repr({**labels, "confidence": 0.5, "rationale": rationale}))
    assert v.status == "parsed" and v.labels == labels


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_property_never_raises_and_never_invents_false(text):
    v = parse_verdict(text)
    assert v.status in ("parsed", "partial", "unparsed")
    assert set(v.labels) == set(LABELS)
    if v.status == "unparsed":
        assert all(x is None for x in v.labels.values())
    if "{" not in text:
        assert v.status == "unparsed"


@settings(max_examples=150, deadline=None)
@given(labels=labels_st, decoy=st.dictionaries(st.text(max_size=5).filter(lambda k: k.lower().strip() not in LABELS),
                                               st.integers(), max_size=3))
def test_property_decoy_object_before_verdict(labels, decoy):
    text = json.dumps(decoy) + " then " + json.dumps(labels)
    assert parse_verdict(text).labels == labels


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=200))
def test_property_balanced_spans_are_brace_delimited(text):
    last = 0
    for start, end in balanced_objects(text):
        assert start >= last and text[start] == "{" and text[end - 1] == "}"
        last = end
