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


def test_defuse_goes_longest_first_even_when_the_shorter_sorts_later():
    # "!<|a|>" contains "<|a|>"; longest first defuses both occurrences, shortest first only one
    assert defuse_special_tokens("!<|a|>", ["<|a|>", "!<|a|>"]) == (f"!{ZW}<{ZW}|a|>", 2)


def test_added_entries_without_a_special_flag_are_not_specials():
    tok = SimpleNamespace(added_tokens_decoder={1: "<plain>"})  # an entry with no .special attribute
    assert tokenizer_special_tokens(SimpleNamespace(tokenizer=tok)) == []


def test_fence_nonce_of_a_reply_with_a_lone_surrogate():
    import hashlib

    from tamperbench.judge.delimit import fence_nonce

    reply = "broken \ud800 text"  # what a byte-level decoder can leave behind
    assert fence_nonce(reply) == hashlib.sha256(f"\x000\x00{reply}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


def test_two_collisions_in_a_row_take_counter_two(monkeypatch):
    import hashlib

    from tamperbench.judge import delimit

    real = hashlib.sha256
    forged = {b"k\x000\x00": "aaaaaaaaaaaaaaaa", b"k\x001\x00": "bbbbbbbbbbbbbbbb"}
    reply = "aaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbb"

    def fake_sha256(data=b""):
        for prefix, hexd in forged.items():
            if data.startswith(prefix):
                return SimpleNamespace(hexdigest=lambda hexd=hexd: hexd + "0" * 48)
        return real(data)

    monkeypatch.setattr(delimit.hashlib, "sha256", fake_sha256)
    nonce = delimit.fence_nonce(reply, salt="k")
    monkeypatch.undo()
    assert nonce == hashlib.sha256(f"k\x002\x00{reply}".encode()).hexdigest()[:16]
