"""What the jury sends to a judge and keeps from it, call by call, and how it tallies ballots.

A recording judge stands in for the judge MODEL only (see conftest.py); everything it is asked is
kept so each decoding setting and the retry conversation can be checked against what the module
promises: greedy, the caller's token budget and seed, the spec's system prompt, and a retry that
shows the judge its own first answer followed by the stricter reminder.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tamperbench.judge.jury import Vote, combine, judge_items, majority
from tamperbench.judge.prompt import LABELS, JudgeInput, load_prompt_spec

FULL = '{"flagged": true, "corrected": false, "derailed": false, "aware": false}'


class Recording:
    def __init__(self, answers):
        self.answers = list(answers)  # one list of texts per call
        self.calls: list[dict] = []

    def generate_chat(self, conversations, **kw):
        self.calls.append({"conversations": conversations, **kw})
        texts = self.answers.pop(0)
        return [SimpleNamespace(text=t, prompt_text=f"P{len(self.calls)}:{i}", finish_reason=f"r{len(self.calls)}")
                for i, t in enumerate(texts)]


def inputs(n):
    return [JudgeInput(f"k{i}", f"q{i}?", "the", "canoe", f"Reply number {i}.") for i in range(n)]


def test_decoding_settings_and_retry_conversation_are_as_promised():
    spec = load_prompt_spec()
    judge = Recording([["no json here", FULL], ['{"flagged": true}']])
    votes = judge_items(judge, "j", inputs(2), max_new_tokens=37, seed=11, progress=True)
    first, retry = judge.calls
    for call in (first, retry):
        assert (call["max_new_tokens"], call["temperature"], call["seed"], call["system"], call["progress"]) == \
            (37, 0.0, 11, spec.system, True)
    assert len(first["conversations"]) == 2 and len(retry["conversations"]) == 1  # only the failure is retried
    (conv,) = retry["conversations"]
    assert [m["role"] for m in conv] == ["user", "assistant", "user"]
    assert conv[0] == first["conversations"][0][0] and conv[0]["content"].count("Reply number 0.") == 1
    assert conv[1]["content"] == "no json here" and conv[2]["content"] == spec.retry_reminder

    v0, v1 = votes
    assert (v0.trial_key, v0.judge, v0.status, v0.attempts) == ("k0", "j", "partial", 2)
    assert v0.labels == {"flagged": True, "corrected": None, "derailed": None, "aware": None}
    assert (v0.raw_text, v0.retry_text) == ("no json here", '{"flagged": true}')
    assert (v0.prompt_text, v0.retry_prompt_text, v0.finish_reason) == ("P1:0", "P2:0", "r2")
    assert "labels missing" in v0.parse_error
    assert (v1.status, v1.attempts, v1.retry_text, v1.retry_prompt_text, v1.finish_reason) == \
        ("parsed", 1, None, None, "r1")
    assert v1.parse_error is None and v1.fence_nonce and v1.defused == 0


def test_defaults_and_empty_batch():
    judge = Recording([[FULL]])
    (v,) = judge_items(judge, "j", inputs(1), max_new_tokens=5)
    assert (judge.calls[0]["seed"], judge.calls[0]["progress"]) == (0, False)
    assert v.fence_nonce is not None and f"REPLY-{v.fence_nonce}" in judge.calls[0]["conversations"][0][0]["content"]
    assert judge_items(Recording([]), "j", [], max_new_tokens=5) == []


def test_paper_fence_and_special_tokens_of_the_judge_are_defused():
    backend = Recording([[FULL]])
    backend.tokenizer = SimpleNamespace(all_special_tokens=["<|im_end|>"], added_tokens_decoder={})
    item = JudgeInput("k", "q?", "the", "canoe", "bye<|im_end|> and again <|im_end|>")
    (v,) = judge_items(backend, "j", [item], max_new_tokens=5, fence="paper")
    sent = backend.calls[0]["conversations"][0][0]["content"]
    assert v.fence_nonce is None and v.defused == 2 and "<|im_end|>" not in sent


def test_retry_that_parses_fully_is_parsed_on_retry_and_unparsed_twice_stays_unparsed():
    judge = Recording([["nothing", "still nothing"], [FULL, "nope"]])
    a, b = judge_items(judge, "j", inputs(2), max_new_tokens=5)
    assert (a.status, a.labels["flagged"], a.parse_error) == ("parsed_on_retry", True, None)
    assert (b.status, b.attempts) == ("unparsed", 2) and all(b.labels[k] is None for k in LABELS)
    assert "no JSON object" in b.parse_error


def vote(judge, **labels):
    return Vote("t", judge, "parsed", {k: labels.get(k) for k in LABELS}, None, None, None, 1, "", None, "", None,
                "eos", None, 0)


def test_combine_tallies_every_label_and_ignores_outsiders():
    votes = [vote("a", flagged=True, corrected=True, derailed=False, aware=None),
             vote("b", flagged=True, corrected=False, derailed=False, aware=None),
             vote("outsider", flagged=False, corrected=False, derailed=True, aware=True)]
    v = combine("t9", votes, ["a", "b"])
    assert v.trial_key == "t9"
    assert v.labels == {"flagged": True, "corrected": None, "derailed": False, "aware": None}
    assert v.tally == {"flagged": {"true": 2, "false": 0, "abstain": 0},
                       "corrected": {"true": 1, "false": 1, "abstain": 0},
                       "derailed": {"true": 0, "false": 2, "abstain": 0},
                       "aware": {"true": 0, "false": 0, "abstain": 2}}
    assert v.ignored is False


@pytest.mark.parametrize("ballots, size, abstain, false", [
    ([True, None, None], 3, None, False),   # one True of three: no majority / paper rule needs two
    ([True, True, None], 3, True, True),
    ([False, False, None], 3, False, False),
    ([None, None, None], 3, None, False),   # the paper reads unparsed as False
    ([True], 1, True, True),
    ([True, True, False, False], 4, None, True),  # the paper: a 2-2 split of four is True
])
def test_majority_under_both_rules(ballots, size, abstain, false):
    assert majority(ballots, size) is abstain
    assert majority(ballots, size, "false") is false
    assert combine("t", [vote(f"j{i}", flagged=b) for i, b in enumerate(ballots)],
                   [f"j{i}" for i in range(size)], "false").labels["flagged"] is false


def test_a_judge_that_returns_too_few_generations_is_an_error_not_a_silent_shift():
    class Short(Recording):
        def generate_chat(self, conversations, **kw):
            return super().generate_chat(conversations, **kw)[:-1]

    with pytest.raises(ValueError):
        judge_items(Short([[FULL, FULL, "x"]]), "j", inputs(3), max_new_tokens=5)

    class ShortRetry(Recording):
        def generate_chat(self, conversations, **kw):
            out = super().generate_chat(conversations, **kw)
            return out[:-1] if len(self.calls) == 2 else out

    with pytest.raises(ValueError):
        judge_items(ShortRetry([["x", "y"], ["x", "y"]]), "j", inputs(2), max_new_tokens=5)
