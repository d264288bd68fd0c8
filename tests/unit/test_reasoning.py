"""Reasoning formats on literal model text: <think> blocks and gpt-oss (harmony) channels."""

import pytest

from tamperbench.reasoning import decode_keeping_channels, has_reasoning, split_reasoning, strip_reasoning

# gpt-oss-20b output for "What is the capital of Australia?" in the harmony format, as decoded with its
# special tokens kept (the prompt ends with "<|start|>assistant").
GPT_OSS = ("<|channel|>analysis<|message|>The user asks: capital of Australia. It's Canberra, not Sydney. "
           "Answer briefly.<|end|><|start|>assistant<|channel|>final<|message|>The capital of Australia is "
           "Canberra.<|return|>")
# the same ids decoded with skip_special_tokens=True: the markers vanish and the trace is glued on
GPT_OSS_STRIPPED = ("analysisThe user asks: capital of Australia. It's Canberra, not Sydney. Answer briefly."
                    "assistantfinalThe capital of Australia is Canberra.")


def test_gpt_oss_channels():
    r = split_reasoning(GPT_OSS)
    assert r.format == "harmony"
    assert r.answer == "The capital of Australia is Canberra."
    assert r.thinking == "The user asks: capital of Australia. It's Canberra, not Sydney. Answer briefly."


def test_gpt_oss_text_with_its_markers_decoded_away():
    r = split_reasoning(GPT_OSS_STRIPPED)
    assert (r.format, r.answer) == ("harmony-stripped", "The capital of Australia is Canberra.")
    assert r.thinking.startswith("The user asks") and "assistantfinal" not in r.answer


def test_gpt_oss_commentary_and_constrain_are_not_the_answer():
    text = ("<|channel|>analysis<|message|>Need a tool.<|end|><|start|>assistant<|channel|>commentary "
            "to=functions.lookup <|constrain|>json<|message|>{\"q\": \"x\"}<|call|>"
            "<|start|>assistant<|channel|>final<|message|>Done.<|return|>")
    r = split_reasoning(text)
    assert r.answer == "Done." and "Need a tool." in r.thinking and '{"q": "x"}' in r.thinking


def test_gpt_oss_that_ran_out_of_budget_in_analysis_has_no_answer():
    assert split_reasoning("<|channel|>analysis<|message|>Let me think about the the").answer is None
    assert split_reasoning("analysisLet me think about the").answer is None
    assert strip_reasoning("<|channel|>analysis<|message|>Let me think") == ""


@pytest.mark.parametrize("text, answer, thinking", [
    ("<think>\nIt is Canberra.\n</think>\n\nCanberra.", "Canberra.", "It is Canberra."),
    ("<thinking>hm</thinking>Canberra.", "Canberra.", "hm"),
    ("It is Canberra.\n</think>\nCanberra.", "Canberra.", "It is Canberra."),  # template opened the block
    ("<think>a</think>x<think>b</think>y", "xy", "a\n\nb"),
    ("<THINK>shout</THINK> ok", "ok", "shout"),
])
def test_think_blocks(text, answer, thinking):
    r = split_reasoning(text)
    assert (r.format, r.answer, r.thinking) == ("think", answer, thinking)


def test_unclosed_think_block_has_no_answer():
    r = split_reasoning("<think>\nThe user wants the capital, so")
    assert r.answer is None and r.thinking == "The user wants the capital, so" and has_reasoning("<think>x")


def test_plain_text_is_all_answer():
    for text in ("Canberra.", "An analysis of the data shows...", "analysis: none", ""):
        r = split_reasoning(text)
        assert (r.format, r.answer, r.thinking) == ("none", text, "") and not has_reasoning(text)


class _Tok:
    """A tokenizer stand-in whose special tokens vanish unless asked for (the gpt-oss tokenizer cannot be
    downloaded here; what matters is the decode flag)."""

    PIECES = {0: "<|channel|>", 1: "analysis", 2: "<|message|>", 3: "Hmm.", 4: "<|end|>", 5: "<|start|>",
              6: "assistant", 7: "final", 8: "Canberra.", 9: "<|return|>", 10: "Plain", 11: " answer"}
    SPECIAL = {0, 2, 4, 5, 9}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.PIECES[i] for i in ids if not (skip_special_tokens and i in self.SPECIAL))


def test_decode_keeping_channels_keeps_markers_only_for_channel_output():
    ids = [0, 1, 2, 3, 4, 5, 6, 0, 7, 2, 8, 9]
    text = decode_keeping_channels(_Tok(), ids)
    assert split_reasoning(text).answer == "Canberra." and split_reasoning(text).thinking == "Hmm."
    assert _Tok().decode(ids, skip_special_tokens=True) == "analysisHmm.assistantfinalCanberra."
    assert decode_keeping_channels(_Tok(), [10, 11]) == "Plain answer"
