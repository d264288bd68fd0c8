"""No verdict text can crash the jury (issue 34, item 1).

The reference turns ANY exception of its verdict parse into an unparsed vote (``except Exception`` in
``_verdict_from`` of fractalego/Sleight-of-Word ``src/awareness/judge.py``). Before this change a
confidence written as a 400-digit integer made ``float()`` raise ``OverflowError`` in both of
tamperbench's parse rules and aborted the judging batch. Red before the fix: the two
``huge_confidence`` cases and the property tests raised ``OverflowError``.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tamperbench.judge.parse import ParsedVerdict, parse_reference, parse_verdict, parse_with
from tamperbench.labels import JUDGE_LABELS

RULES = ("reference", "robust")
LABELS_TRUE = {k: True for k in JUDGE_LABELS}
HUGE = "9" * 400

HOSTILE = {
    "huge_confidence": '{"flagged": true, "corrected": true, "derailed": false, "aware": false, "confidence": ' + HUGE + "}",
    "huge_negative_confidence": json.dumps(LABELS_TRUE)[:-1] + ', "confidence": -' + HUGE + "}",
    "huge_label": '{"flagged": ' + HUGE + ', "corrected": true, "derailed": false, "aware": false}',
    "past_int_digit_limit": '{"flagged": true, "confidence": ' + "1" * 5000 + "}",
    "huge_exponent": json.dumps(LABELS_TRUE)[:-1] + ', "confidence": 1e999}',
    "nan": json.dumps(LABELS_TRUE)[:-1] + ', "confidence": NaN}',
    "infinity": json.dumps(LABELS_TRUE)[:-1] + ', "confidence": -Infinity}',
    "deep_nesting": '{"flagged": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "deep_objects": '{"a": ' * 50_000 + "1" + "}" * 50_000,
    "python_deep": "{'flagged': " + "(" * 5000 + ")" * 5000 + "}",
    "odd_types": '{"flagged": {"x": 1}, "corrected": [1, 2], "derailed": "maybe", "aware": 0.5, '
                 '"confidence": [0.5], "rationale": {"a": 1}}',
    "label_keys_not_strings": "{1: 2, None: 3, (1,): 4}",
    "unicode": '{"flagged": "\ud800", "corrected": "\u202e", "derailed": false, "aware": "\U0001f600", "confidence": "½"}',
    "lone_surrogate_text": "\ud800{\udfff}",
    "nul_bytes": '{"flagged": true\x00, "aware": false}',
    "unclosed": "{" * 2_000,  # the robust scan restarts after each unclosed brace: quadratic, but bounded by the budget
    "empty": "",
}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_verdict_texts_give_a_vote(rule, name):
    v = parse_with(rule, HOSTILE[name], reply="the judged reply")
    assert isinstance(v, ParsedVerdict) and v.status in ("parsed", "partial", "unparsed")


def test_a_400_digit_confidence_is_what_the_reference_makes_of_it():
    ref = parse_reference(HOSTILE["huge_confidence"])  # float(10**400) raises: the whole vote is unparsed
    assert ref.status == "unparsed" and all(ref.labels[k] is None for k in JUDGE_LABELS)
    assert "OverflowError" in ref.error
    robust = parse_verdict(HOSTILE["huge_confidence"])  # the labels are real; the confidence is unreadable
    assert robust.status == "parsed" and robust.confidence is None and robust.labels["flagged"] is True


def _json_values(leaves):
    return st.recursive(leaves, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
        st.sampled_from([*JUDGE_LABELS, "confidence", "rationale"]) | st.text(max_size=8), kids, max_size=6),
        max_leaves=20)


_LEAVES = (st.none() | st.booleans() | st.integers(min_value=-10**450, max_value=10**450)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20)
           | st.sampled_from(["true", "false", "yes", "NaN", "Infinity", "-Infinity", "1e400", HUGE]))
_RAW_NUMBERS = st.sampled_from([HUGE, "-" + HUGE, "1e999", "NaN", "Infinity", "-Infinity", "0.5", "1", "true", "None"])


@st.composite
def verdict_texts(draw) -> str:
    """Free text, JSON-ish verdicts with odd values, and verdicts with raw number tokens spliced in."""
    kind = draw(st.sampled_from(["text", "json", "raw", "wrapped"]))
    if kind == "text":
        return draw(st.text(alphabet=st.characters(codec=None), max_size=300))
    if kind == "raw":
        fields = draw(st.dictionaries(st.sampled_from([*JUDGE_LABELS, "confidence"]), _RAW_NUMBERS, max_size=6))
        return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"
    obj = draw(st.dictionaries(st.sampled_from([*JUDGE_LABELS, "confidence", "rationale"]), _json_values(_LEAVES),
                               max_size=6))
    text = json.dumps(obj, allow_nan=True)
    if kind == "wrapped":
        text = draw(st.text(max_size=40)) + draw(st.sampled_from(["```json\n", "<think>", "{", "'", ""])) + text + \
            draw(st.text(max_size=40))
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=verdict_texts(), reply=st.none() | st.text(max_size=50))
def test_no_text_makes_either_parse_rule_raise(text, reply):
    for rule in RULES:
        v = parse_with(rule, text, reply=reply)
        assert isinstance(v, ParsedVerdict) and v.status in ("parsed", "partial", "unparsed")
        assert set(v.labels) == set(JUDGE_LABELS)
        assert v.confidence is None or 0.0 <= v.confidence <= 1.0
        for text in (v.rationale, v.error):
            assert text is None or isinstance(text.encode("utf-8"), bytes)  # storable: no lone surrogate from a "\ud800" escape


@pytest.mark.parametrize("rule", RULES)
def test_a_whole_jury_run_stores_every_hostile_verdict(tmp_path, scripted_judge, rule):
    """Through ``run_jury`` into the run's DuckDB: a lone surrogate in the judge's text or in its JSON
    (``"\\ud800"``) could not be stored (UnicodeEncodeError) before ``clean_text``; now every vote is stored."""
    from tamperbench.judge.runner import JudgeConfig, run_jury
    from tamperbench.judge.samples import sample_rows, write_fixture_run
    from tamperbench.store import RunStore

    texts = [HOSTILE[k] for k in ("unicode", "lone_surrogate_text", "huge_confidence", "deep_nesting", "odd_types")]
    texts.append('{"flagged": true, "corrected": false, "derailed": false, "aware": false, "rationale": "\\ud800"}')
    rows = sample_rows()[: len(texts)]
    by_reply = {r.reaction_text: t for r, t in zip(rows, texts)}
    judge = scripted_judge("a", lambda user, n: next(t for reply, t in by_reply.items() if reply in user))
    run = write_fixture_run(tmp_path / "run", rows)
    run_jury(run, ["a"], lambda spec: judge, JudgeConfig(parse=rule, max_new_tokens=64), show_progress=False)
    with RunStore.open_existing(run) as store:
        votes = store.rows("judge_votes")
    assert len(votes) == len(texts)
    assert any("\ufffd" in (v["raw_text"] or "") + (v["rationale"] or "") for v in votes)
