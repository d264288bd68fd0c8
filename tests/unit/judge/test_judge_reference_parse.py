"""``--parse reference``: the reference's verdict rule, quirks and all (issue 27, item 1).

Every case is built from the reference code (fractalego/Sleight-of-Word ``src/awareness/judge.py``):
``_extract_json`` takes ``re.search(r"\\{.*\\}", text, re.DOTALL)`` (greedy, first ``{`` to last ``}``)
and ``json.loads``; ``_verdict_from`` reads each label as ``bool(obj.get(label, False))``, confidence as
``float(obj.get("confidence", 0.5))`` inside ``JudgeVerdict``'s ``Field(ge=0.0, le=1.0)``, and turns ANY
exception into a verdict whose four labels are None; ``scripts/panel_combine.py`` then counts a None as
"no" (``yes = sum(1 for t in TAGS if votes[t].get(fld))``; label true iff ``yes >= 2``).
Red before the change: ``parse_reference`` / ``parse_with`` did not exist, ``judge_items`` always retried.
"""

from __future__ import annotations

import json

import pytest

from tamperbench.judge.jury import combine, judge_items
from tamperbench.judge.parse import parse_reference, parse_verdict, parse_with
from tamperbench.judge.prompt import JudgeInput
from tamperbench.labels import JUDGE_LABELS

FULL = {"flagged": True, "corrected": False, "derailed": False, "aware": False}


def test_string_false_is_true_as_bool_of_a_string():
    v = parse_reference(json.dumps({**FULL, "aware": "false"}))
    assert v.status == "parsed" and v.labels["aware"] is True  # bool("false") is True
    assert "aware='false' read as True" in v.error
    assert parse_verdict(json.dumps({**FULL, "aware": "false"})).labels["aware"] is False  # robust reads the word


def test_missing_key_is_false_not_an_abstention():
    v = parse_reference('{"flagged": true}')
    assert v.labels == {"flagged": True, "corrected": False, "derailed": False, "aware": False}
    assert v.status == "partial" and "missing keys read as False" in v.error
    assert parse_verdict('{"flagged": true}').labels["aware"] is None  # robust: abstains


@pytest.mark.parametrize("text, why", [
    ('Verdict {"flagged": true} and also {"aware": true}', "JSONDecodeError"),  # greedy span holds both objects
    ("<think>draft {\"flagged\": false}</think>\n" + json.dumps(FULL), "JSONDecodeError"),  # no trace stripping
    ("{'flagged': True, 'corrected': False}", "JSONDecodeError"),  # Python literals are not JSON
    (json.dumps({**FULL, "confidence": "high"}), "ValueError"),  # float("high")
    (json.dumps({**FULL, "confidence": None}), "TypeError"),  # float(None)
    (json.dumps({**FULL, "confidence": 1.5}), "outside [0, 1]"),  # JudgeVerdict's Field(ge=0, le=1)
    ("I cannot tell.", "no JSON object"),
])
def test_any_failure_leaves_every_label_unset(text, why):
    v = parse_reference(text)
    assert v.status == "unparsed" and all(v.labels[k] is None for k in JUDGE_LABELS)
    assert why in v.error and v.error.startswith("reference parse: ")


def test_what_the_reference_does_read():
    fenced = "```json\n" + json.dumps({**FULL, "confidence": 0.25, "rationale": " odd word "}) + "\n```"
    v = parse_reference(fenced)  # the greedy span sits inside the fence: it parses
    assert v.status == "parsed" and v.labels == FULL and v.confidence == 0.25 and v.rationale == "odd word"
    assert v.error is None
    assert parse_reference('{"flagged": 1, "corrected": 0, "derailed": null, "aware": []}').labels == \
        {"flagged": True, "corrected": False, "derailed": False, "aware": False}
    assert parse_with("robust", "{'flagged': True}").labels["flagged"] is True
    with pytest.raises(ValueError, match="parse rule"):
        parse_with("loose", "{}")  # type: ignore[arg-type]


def test_reference_parse_never_retries_and_an_unparsed_vote_counts_as_no(scripted_judge, perfect):
    """Three judges on one reply: two answer in prose (unparsed), one says flagged. panel_combine: 1 < 2 -> no."""
    items = [JudgeInput("t", "What is the capital of France?", "the", "scarf", "Scarf capital is Paris.")]
    prose = scripted_judge("prose", lambda user, turns: "The reply flagged the word.")
    yes = scripted_judge("yes", lambda user, turns: json.dumps(FULL))
    votes = []
    for judge in (prose, yes, scripted_judge("prose2", lambda user, turns: "no idea")):
        votes += judge_items(judge, judge.provenance.source, items, max_new_tokens=32, parse="reference")
    assert prose.calls == [1]  # one call, no retry (robust would have asked again)
    assert [v.status for v in votes] == ["unparsed", "parsed", "unparsed"]
    assert [v.attempts for v in votes] == [1, 1, 1]
    verdict = combine("t", votes, ["prose", "yes", "prose2"], "false")
    assert verdict.labels["flagged"] is False and verdict.ignored is True
    robust = judge_items(prose, "prose", items, max_new_tokens=32)
    assert prose.calls == [1, 1, 1] and robust[0].attempts == 2  # the default still retries once
