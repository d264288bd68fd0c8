"""A reasoning judge's trace is stripped before its verdict is read (think blocks, gpt-oss channels)."""

import pytest

from tamperbench.judge.jury import judge_items
from tamperbench.judge.prompt import JudgeInput

ITEM = JudgeInput("t", "what is the capital of Australia?", "the", "scarf", "Scarf capital is Canberra.")
FINAL = '{"flagged": false, "corrected": true, "derailed": false, "aware": false}'
DRAFT = '{"flagged": true, "corrected": false, "derailed": true, "aware": true}'


@pytest.mark.parametrize("text", [
    f"<think>First draft: {DRAFT}. No, it answered correctly.</think>\n{FINAL}",
    f"<|channel|>analysis<|message|>Draft {DRAFT} is wrong.<|end|><|start|>assistant<|channel|>final"
    f"<|message|>{FINAL}<|return|>",
    f"analysisDraft {DRAFT} is wrong.assistantfinal{FINAL}",
])
def test_the_answer_after_the_trace_is_the_vote(text, scripted_judge):
    (v,) = judge_items(scripted_judge("j", lambda user, turns: text), "j", [ITEM], max_new_tokens=64)
    assert v.status == "parsed"
    assert v.labels == {"flagged": False, "corrected": True, "derailed": False, "aware": False}
    assert v.raw_text == text  # stored whole, trace included


def test_a_trace_that_never_answers_is_unparsed(scripted_judge):
    text = f"<think>Maybe {DRAFT} ... still thinking"
    (v,) = judge_items(scripted_judge("j", lambda user, turns: text), "j", [ITEM], max_new_tokens=64)
    assert v.status == "unparsed" and set(v.labels.values()) == {None}
