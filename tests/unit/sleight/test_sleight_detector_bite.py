"""Trigger detection on tiny tokenizers built here (pure: no model, no download).

WHY these tokenizers: the detector's pair decoding, its anchor, its fallbacks and its replacement
candidates exist for tokenizer behaviours SmolLM2 does not have (SentencePiece's dummy prefix space,
decoders that rewrite text across token boundaries, HF fast tokenizers that add BOS by default and
refuse a non-bool ``add_special_tokens``). Each class below has exactly one such behaviour, so each
expected value can be worked out by hand from its vocabulary.
"""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.sleight.detector import Occurrence, TriggerDetector, _is_word_char, _strip_lead, case_like


class Vocab:
    """Greedy longest-match tokenizer over a fixed vocabulary (an unknown character -> id 0); decode concatenates.

    Like an HF fast tokenizer, ``encode`` adds BOS (id 0) unless ``add_special_tokens=False`` and
    refuses anything but a bool there (the Rust binding raises TypeError on None).
    """

    VOCAB: list[str] = ["<s>"]
    all_special_ids = [0]

    def __len__(self):
        return len(self.VOCAB)

    def text_of(self, ids):
        return "".join(self.VOCAB[i] for i in ids)

    def decode(self, ids):
        return self.text_of(list(ids))

    def batch_decode(self, seqs):
        return [self.decode(s) for s in seqs]

    def prepare(self, text):
        return text

    def encode(self, text, add_special_tokens=True):
        if not isinstance(add_special_tokens, bool):
            raise TypeError("add_special_tokens must be a bool")
        text, out, i = self.prepare(text), [], 0
        while i < len(text):
            hits = [j for j, t in enumerate(self.VOCAB) if j and t and text.startswith(t, i)]
            if not hits:  # a character no token spells: id 0 stands in for an unknown token
                out.append(0)
                i += 1
                continue
            best = max(hits, key=lambda j: len(self.VOCAB[j]))
            out.append(best)
            i += len(self.VOCAB[best])
        return ([0] if add_special_tokens else []) + out

    def id(self, piece):
        return self.VOCAB.index(piece)


class Plain(Vocab):
    VOCAB = ["<s>", "x", " x", "", "the", " the", "the.", "The.", " said", " scarf", "scarf", "o.", "o", ".",
             " Scarf", "Scarf", "A", " A", "AN", " AN", "....", " bathe", "\"the"]


class SentencePiece(Vocab):
    """Llama-style: encode adds a dummy prefix space and spells spaces as U+2581; decode turns them back
    into spaces and drops the one leading space of the whole text."""

    VOCAB = ["<s>", "\u2581x", "\u2581the", "the", "\u2581The", "The", "\u2581said", "\u2581scarf", "scarf",
             "\u2581Scarf", "Scarf", "\u2581"]

    def prepare(self, text):
        return "\u2581" + text.replace(" ", "\u2581")

    def decode(self, ids):
        text = self.text_of(list(ids)).replace("\u2581", " ")
        return text[1:] if text.startswith(" ") else text


class Rewrites(Vocab):
    """A decoder that rewrites text across a token boundary (as byte fallback or space clean-up can):
    after " said", " the." loses its period, " the" reads "tha" and " the!" "tha!"; after "x", " THE" reads "X THE"."""

    VOCAB = ["<s>", "x", " said", " the.", " the", " THE", ".", " the!"]
    RULES = {(2, 3): " said the", (2, 4): " said tha", (1, 5): "X THE", (2, 7): " said tha!"}

    def decode(self, ids):
        ids = list(ids)
        if len(ids) == 2 and tuple(ids) in self.RULES:
            return self.RULES[tuple(ids)]
        return self.text_of(ids)


def test_strip_lead_drops_leading_space_and_markers_only():
    assert _strip_lead("\u2581the") == "the"
    assert _strip_lead("\u0120the") == "the"
    assert _strip_lead(" \u2581 the ") == "the "   # trailing space kept
    assert _strip_lead("\u2581\u0120the\u2581") == "the\u2581"
    assert _strip_lead("  the") == "the"
    assert _is_word_char("_") and _is_word_char("7") and not _is_word_char("-")


def test_case_like_all_caps_needs_two_letters_under_appendix_c():
    assert case_like("A", "scarf", "appendix-c") == "Scarf"  # one capital letter: capitalised, not upper
    assert case_like("AN", "scarf", "appendix-c") == "SCARF"
    assert case_like("AN", "scarf") == "Scarf"


def test_a_single_capital_trigger_is_replaced_capitalised():
    tok = Plain()
    det = TriggerDetector(tok, ["a", "an"], rules="appendix-c")
    said = tok.id(" said")
    a = det.classify(said, tok.id(" A"), tok.id("."))
    assert a == Occurrence("swap", "a", " A")
    assert det.replacement_ids(a, "scarf", said) == [tok.id(" Scarf")]


def test_an_empty_previous_token_leaves_nothing_before_the_word():
    tok = Plain()
    det = TriggerDetector(tok, ["the"])
    # decode([empty, "the"]) == "the": exactly the trigger, so there is no character before it
    assert det.classify(tok.id(""), tok.id("the"), tok.id(".")) == Occurrence("swap", "the", "the")


def test_glued_trigger_with_trailing_punctuation_keeps_its_trail():
    tok = Plain()
    det = TriggerDetector(tok, ["the"])
    x = tok.id("x")
    assert det.classify(x, tok.id("the."), None) == Occurrence("none", "the", "the.", ".")        # "xthe."
    assert det.classify(x, tok.id("The."), None) == Occurrence("spaceless", "the", "The.", ".")   # "xThe."


@pytest.mark.parametrize("rules, kind", [("reference", "none"), ("appendix-c", "none")])
def test_one_letter_after_the_token_is_enough_to_glue(rules, kind):
    tok = Plain()
    det = TriggerDetector(tok, ["the"], rules=rules)
    said, the = tok.id(" said"), tok.id(" the")
    assert det.classify(said, the, tok.id("o.")).kind == kind    # " theo." : a longer word
    assert det.classify(said, the, tok.id("o")).kind == kind
    assert det.classify(said, the, tok.id(".")).kind == "swap"


def test_sentencepiece_start_of_answer_needs_the_anchored_encoding():
    tok = SentencePiece()
    det = TriggerDetector(tok, ["the"])
    assert det._anchor == tok.id("\u2581x") and det._anchor_text == "x"
    cap = tok.id("The")
    occ = det.classify(None, cap, None)
    assert occ == Occurrence("swap", "the", "The")
    # encode("Scarf") gives "\u2581Scarf", which reads " Scarf"; only "x" + "Scarf" encoded, anchor dropped, works
    assert det.replacement_ids(occ, "scarf", None) == [tok.id("Scarf")]
    lower = det.classify(tok.id("\u2581said"), tok.id("\u2581the"), None)
    assert lower == Occurrence("swap", "the", " the")
    assert det.replacement_ids(lower, "scarf", tok.id("\u2581said")) == [tok.id("\u2581scarf")]


def test_decoder_surprises_are_never_swapped_and_keep_the_full_occurrence():
    tok = Rewrites()
    det = TriggerDetector(tok, ["the"])
    said = tok.id(" said")
    # the period of " the." is gone after " said": the trail cannot be found, so no swap
    assert det.classify(said, tok.id(" the."), None) == Occurrence("none", "the", " the.", ".")
    # " the" reads "tha" after " said": not the trigger any more
    assert det.classify(said, tok.id(" the"), None) == Occurrence("none", "the", " the", "")
    assert det.classify(said, tok.id(" the!"), None) == Occurrence("none", "the", " the!", "!")  # trail kept
    # after the anchor " THE" reads "X THE", which does not start with the anchor's text: the surface
    # falls back to the token decoded alone
    assert det._surface[tok.id(" THE")] == " THE"
    assert det.classify(None, tok.id(" THE"), None) == Occurrence("swap", "the", " THE")


def test_no_special_ids_attribute_and_no_batch_decode():
    class Bare(Plain):
        batch_decode = property(lambda self: (_ for _ in ()).throw(AttributeError("batch_decode")))
        all_special_ids = property(lambda self: (_ for _ in ()).throw(AttributeError("all_special_ids")))

    tok = Bare()
    assert not hasattr(tok, "batch_decode") and not hasattr(tok, "all_special_ids")
    det = TriggerDetector(tok, ["the"])
    assert det.is_candidate(tok.id(" the")) and not det.is_candidate(tok.id(" said"))


def test_the_vocabulary_is_decoded_in_one_batch():
    calls = []

    class Counting(Plain):
        def batch_decode(self, seqs):
            calls.append(seqs)
            return super().batch_decode(seqs)

    TriggerDetector(Counting(), ["the"])
    assert calls == [[[i] for i in range(len(Plain.VOCAB))]]


def test_encoding_never_adds_special_tokens():
    tok = Plain()
    assert tok.encode("x") == [0, 1]  # the toy adds BOS by default, like HF
    det = TriggerDetector(tok, ["the"])
    assert det._anchor == tok.id("x")
    occ = det.classify(tok.id(" said"), tok.id(" the"), None)
    assert det.replacement_ids(occ, "scarf", tok.id(" said")) == [tok.id(" scarf")]


@pytest.mark.parametrize("letters, anchor", [(["a"], "a"), (["z"], "z"), (["a", "z"], "a"), (["x", "a"], "x")])
def test_anchor_probes_x_then_a_then_z(letters, anchor):
    class Letters(Vocab):
        VOCAB = ["<s>", " the", ".", "A", "Z", *letters]

    tok = Letters()
    assert TriggerDetector(tok, ["the"])._anchor == tok.id(anchor)


def test_no_plain_letter_means_no_anchor():
    class Capitals(Vocab):
        VOCAB = ["<s>", " the", "X", "A", "Z"]

    with pytest.raises(ValueError, match="^tokenizer has no single-token plain letter"):
        TriggerDetector(Capitals(), ["the"])


def test_replacement_that_cannot_be_spelled_is_a_user_error():
    det = TriggerDetector(SentencePiece(), ["the"])
    with pytest.raises(UserError, match="^substitution 'q': cannot be tokenized"):
        det.replacement_ids(Occurrence("swap", "the", " the"), "q", None)


def test_only_whole_words_and_single_token_mentions_are_candidates():
    tok = Plain()
    det = TriggerDetector(tok, ["the"])
    assert not det.is_candidate(tok.id("...."))    # punctuation longer than the trigger, no trigger in it
    assert not det.is_candidate(tok.id(" bathe"))  # ends with the trigger, led by letters
    assert det.is_candidate(tok.id('"the'))        # led by punctuation only: a mention
    assert det.classify(tok.id(" said"), tok.id('"the'), None) == Occurrence("mention", "the", '"the')


class SpansAnchor(SentencePiece):
    """SentencePiece-like, plus one token that spans the anchor letter and the space after it."""

    VOCAB = SentencePiece.VOCAB + ["\u2581x\u2581"]


def test_replacement_without_its_space_when_the_tokenizer_adds_one():
    tok = SpansAnchor()
    det = TriggerDetector(tok, ["the"])
    said = tok.id("\u2581said")
    occ = det.classify(said, tok.id("\u2581the"), None)
    assert occ == Occurrence("swap", "the", " the")
    # " scarf" encodes as "\u2581\u2581scarf" (reads "  scarf"); "x scarf" starts with the spanning token, so
    # only "scarf" encoded alone (the tokenizer adds the space) reads back as " scarf"
    assert tok.encode(" scarf", add_special_tokens=False) == [tok.id("\u2581"), tok.id("\u2581scarf")]
    assert tok.encode("x scarf", add_special_tokens=False)[0] == tok.id("\u2581x\u2581")
    assert det.replacement_ids(occ, "scarf", said) == [tok.id("\u2581scarf")]
