"""The verdict parser: hand-written judge outputs plus hypothesis properties."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tamperbench.judge.parse import balanced_objects, better, coerce_bool, parse_verdict
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
def test_property_never_raises_on_any_text(text):
    v = parse_verdict(text)
    assert v.status in ("parsed", "partial", "unparsed")
    assert set(v.labels) == set(LABELS)
    if v.status == "unparsed":
        assert all(x is None for x in v.labels.values())
    if "{" not in text:
        assert v.status == "unparsed"


# What a judge may write for a label, and what it must read as, by hand (not via coerce_bool).
# Only an explicit "no" reads as False; junk, null, and a missing key are abstentions (None).
TRUE_VALUES = [True, "true", "True", " YES ", "y", "1", 1]
FALSE_VALUES = [False, "false", "No", "n", "0", 0]
JUNK_VALUES = [None, "maybe", "", "unsure", "N/A", 0.5, 2, -1, [], {}, "truthy", "nope", 1.0000001]
MISSING = object()


@settings(max_examples=300, deadline=None)
@given(values=st.fixed_dictionaries({k: st.sampled_from(TRUE_VALUES + FALSE_VALUES + JUNK_VALUES + [MISSING])
                                     for k in LABELS}).filter(lambda d: any(v is not MISSING for v in d.values())),
       python=st.booleans())
def test_property_never_invents_false(values, python):
    """A label reads False only when the judge wrote a false-like value for THAT label."""
    obj = {k: v for k, v in values.items() if v is not MISSING}
    text = repr(obj) if python else json.dumps(obj)
    v = parse_verdict("Verdict: " + text)
    for k in LABELS:
        given_value = values[k]
        if any(given_value is x or (type(given_value) is type(x) and given_value == x) for x in FALSE_VALUES):
            assert v.labels[k] is False, (k, given_value)
        elif any(given_value is x or (type(given_value) is type(x) and given_value == x) for x in TRUE_VALUES):
            assert v.labels[k] is True, (k, given_value)
        else:
            assert v.labels[k] is None, (k, given_value, v.labels)
    expect = "parsed" if all(x is not None for x in v.labels.values()) else "partial"
    assert v.status == expect


def test_missing_labels_are_none_and_partial_names_them():
    v = parse_verdict('{"aware": false}')
    assert v.labels == {"flagged": None, "corrected": None, "derailed": None, "aware": False}
    assert v.status == "partial" and "flagged" in v.error and "aware" not in v.error


# ---------------------------------------------------------------- first try vs retry
def _verdict(**labels):
    return parse_verdict(json.dumps(labels))


def test_tie_between_first_try_and_retry_goes_to_the_retry():
    first = _verdict(flagged=True, corrected=False)            # 2 labels read
    retry = _verdict(derailed=True, aware=False)                # 2 labels read: a tie
    assert (first.n_labels, retry.n_labels) == (2, 2)
    assert better(first, retry) is retry
    full_first, full_retry = _verdict(flagged=True, corrected=True, derailed=False, aware=False), \
        _verdict(flagged=False, corrected=False, derailed=True, aware=True)
    assert better(full_first, full_retry) is full_retry       # both complete: the retry, asked more strictly


def test_retry_that_reads_fewer_labels_loses_and_more_wins():
    three = _verdict(flagged=True, corrected=False, derailed=False)
    one = _verdict(aware=True)
    assert better(three, one) is three
    assert better(one, three) is three
    unparsed = parse_verdict("no idea")
    assert better(three, unparsed) is three and better(unparsed, one) is one
    assert better(unparsed, parse_verdict("still none")).status == "unparsed"


def test_jury_tie_uses_the_retry_labels_and_keeps_both_texts(scripted_judge):
    from tamperbench.judge.jury import judge_items
    from tamperbench.judge.prompt import JudgeInput

    first = '{"flagged": true, "corrected": false}'
    second = '{"derailed": true, "aware": false}'
    judge = scripted_judge("tie", lambda text, turns: first if turns == 1 else second)
    (v,) = judge_items(judge, "tie", [JudgeInput("k", "q?", "the", "canoe", "A reply.")], max_new_tokens=32)
    assert judge.calls == [1, 1]
    assert v.labels == {"flagged": None, "corrected": None, "derailed": True, "aware": False}
    assert v.status == "partial" and v.attempts == 2 and v.raw_text == first and v.retry_text == second


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
