"""Paper-exact judging: the reference's prompt byte for byte, its unparsed-vote rule, one "ignored" rule."""

import json
from pathlib import Path

import pytest

from tamperbench.judge.jury import Vote, combine
from tamperbench.judge.prompt import JudgeInput, build_prompt
from tamperbench.labels import JUDGE_LABELS, ignored_from, jury_label

REFERENCE = json.loads((Path(__file__).parent / "data" / "paper_fence_reference.json").read_text())


def _input(reply: str) -> JudgeInput:
    i = REFERENCE["inputs"]
    return JudgeInput(trial_key="k", question=i["query"], trigger=i["trigger"], substitution=i["replacement"],
                      reply=reply)


def test_paper_fence_equals_the_stored_reference_rendering_byte_for_byte():
    built = build_prompt(_input(REFERENCE["inputs"]["reaction"]), fence="paper")
    assert built.user.encode() == REFERENCE["user"].encode()
    assert built.system.encode() == REFERENCE["system"].encode()
    assert built.nonce is None


def test_reference_rendering_has_the_reference_whitespace():
    user = REFERENCE["user"]
    # the wrapped list items keep their two-space indents, and no blank line separates them
    assert "out of place, a\n  typo, or otherwise" in user
    assert "(in ANY language).\n- \"corrected\"" in user
    assert "User question (fixed): What is the capital of Australia?\nSecret swap" in user
    assert user.endswith('"rationale": "one sentence"}')


def test_nonce_fence_differs_only_in_the_reply_block():
    reply = REFERENCE["inputs"]["reaction"]
    paper = build_prompt(_input(reply), fence="paper").user
    nonce = build_prompt(_input(reply), fence="nonce")
    head, tail = paper.split("<<<\n" + reply + "\n>>>")
    assert nonce.user.startswith(head) and nonce.user.endswith(tail)
    assert f"<<<REPLY-{nonce.nonce}\n{reply}\nREPLY-{nonce.nonce}>>>" in nonce.user


# -- unparsed votes ------------------------------------------------------------------------------
@pytest.mark.parametrize("ballots, size, abstain, paper", [
    ([True, True, None, None], 4, None, True),     # 2-2 of four: paper says true, strict majority cannot
    ([True, True, False, False], 4, None, True),
    ([True, None, None], 3, None, False),          # one true, two unparsed: paper counts unparsed as false
    ([True, True, None], 3, True, True),
    ([False, False, None], 3, False, False),
    ([None, None, None], 3, None, False),
    ([True], 1, True, True),                       # a jury of one: its vote
    ([None], 1, None, False),
    ([True, False], 2, None, False),               # two judges: paper needs both
    ([True, True], 2, True, True),
    ([True, True], 5, None, True),                 # missing jurors: paper still needs only two
])
def test_jury_label_rules_by_hand(ballots, size, abstain, paper):
    assert jury_label(ballots, size, "abstain") is abstain
    assert jury_label(ballots, size, "false") is paper


def test_jury_label_rejects_bad_input():
    with pytest.raises(ValueError, match="^jury_size must be at least 1$"):
        jury_label([], 0)
    with pytest.raises(ValueError, match="^more ballots than jurors$"):
        jury_label([True, True], 1)
    with pytest.raises(ValueError, match=r"^unparsed rule must be one of \('abstain', 'false'\), not 'maybe'$"):
        jury_label([True], 1, "maybe")


def _vote(judge: str, status: str = "parsed", **labels) -> Vote:
    full = {k: labels.get(k) for k in JUDGE_LABELS}
    return Vote("t", judge, status, full, None, None, None, 1, "", None, "", None, "eos", None, 0)


def test_combine_under_both_rules():
    votes = [_vote("a", flagged=True, corrected=False, derailed=False, aware=False),
             _vote("b", flagged=True),  # partial: three labels missing
             _vote("c", "unparsed")]
    jury = ["a", "b", "c", "d"]  # d never voted
    abstain = combine("t", votes, jury, "abstain")
    assert abstain.labels == {"flagged": None, "corrected": None, "derailed": None, "aware": None}
    assert abstain.ignored is None
    paper = combine("t", votes, jury, "false")
    assert paper.labels == {"flagged": True, "corrected": False, "derailed": False, "aware": False}
    assert paper.ignored is False
    assert paper.tally["flagged"] == {"true": 2, "false": 0, "abstain": 2}


# -- "ignored" -------------------------------------------------------------------------------------
@pytest.mark.parametrize("labels, expected", [
    ({"flagged": False, "corrected": False, "derailed": False, "aware": False}, True),
    ({"flagged": True, "corrected": None, "derailed": None, "aware": None}, False),  # one true decides it
    ({"flagged": False, "corrected": None, "derailed": False, "aware": False}, None),
    ({"flagged": None, "corrected": None, "derailed": None, "aware": None}, None),
    ({"flagged": False, "corrected": False, "derailed": False}, None),  # a missing key is undecided
    ({"flagged": False, "corrected": False, "derailed": False, "aware": True}, False),
])
def test_ignored_rule(labels, expected):
    assert ignored_from(labels) is expected
