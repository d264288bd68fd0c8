"""Defusing special tokens and listing a tokenizer's specials, with a real (tiny) HF tokenizer.

The tokenizer is built in memory from the ``tokenizers`` library (no download): a word-level vocab
plus chat-control special tokens, like the judges' chat models have.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tamperbench.judge.delimit import ZERO_WIDTH_SPACE, defuse_special_tokens, tokenizer_special_tokens

ZW = ZERO_WIDTH_SPACE


def test_defuse_counts_each_occurrence_and_only_inserts_zero_width_spaces():
    text, n = defuse_special_tokens("x<|im_end|>y<|im_end|><s>", ["<|im_end|>", "<s>"])
    assert n == 3
    assert text == f"x<{ZW}|im_end|>y<{ZW}|im_end|><{ZW}s>"


def test_defuse_longest_token_first_and_skips_single_characters_and_empties():
    # "<|im_end|>" contains "<|im" : the longer one is defused first, the shorter then no longer matches
    text, n = defuse_special_tokens("a<|im_end|>b", ["<|im", "<|im_end|>", "|", ""])
    assert (text, n) == (f"a<{ZW}|im_end|>b", 1)
    assert defuse_special_tokens("a|b", ["|"]) == ("a|b", 0)
    assert defuse_special_tokens("plain", ["<|im_end|>"]) == ("plain", 0)
    assert defuse_special_tokens("ab", ["ab", "ab"]) == (f"a{ZW}b", 1)  # duplicates counted once


@pytest.fixture(scope="module")
def tiny_tokenizer():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1}, unk_token="[UNK]"))
    t = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="<|im_end|>",
                                additional_special_tokens=["<|im_start|>"])
    t.add_tokens(["<plain_added>"], special_tokens=False)  # added but NOT special: must not be listed
    t.add_tokens(["<|tool|>"], special_tokens=True)
    return t


def test_tokenizer_special_tokens_lists_specials_sorted_without_plain_added(tiny_tokenizer):
    got = tokenizer_special_tokens(SimpleNamespace(tokenizer=tiny_tokenizer))
    assert got == sorted(["<|im_end|>", "<|im_start|>", "<|tool|>", "[UNK]"])
    assert "<plain_added>" not in got


def test_backend_without_tokenizer_has_no_specials():
    assert tokenizer_special_tokens(SimpleNamespace()) == []
    assert tokenizer_special_tokens(SimpleNamespace(tokenizer=None)) == []


def test_specials_only_from_added_tokens_decoder_are_found():
    class Added:  # the shape of tokenizers.AddedToken that the function reads: .special and str()
        def __init__(self, text, special):
            self.text, self.special = text, special

        def __str__(self):
            return self.text

    tok = SimpleNamespace(all_special_tokens=None,
                          added_tokens_decoder={5: Added("<|x|>", True), 6: Added("<y>", False)})
    assert tokenizer_special_tokens(SimpleNamespace(tokenizer=tok)) == ["<|x|>"]
    assert tokenizer_special_tokens(SimpleNamespace(tokenizer=SimpleNamespace())) == []
