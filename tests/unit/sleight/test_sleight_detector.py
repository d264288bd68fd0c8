"""Trigger detection on real token ids (protocol Appendix C).

Runs against the real SmolLM2 tokenizer and against the same tokenizer wrapped so that a token
decoded *alone* loses its leading spaces. The wrapper mimics Yi, whose tokenizer decodes the
space-prefixed "the" token as "the" alone but as " the" after a predecessor; the detector must
find word boundaries by pair-decoding, so both tokenizers must give the same answers.
"""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.sleight.detector import Occurrence, TriggerDetector, case_like


class DropsSpaceAlone:
    """SmolLM2's tokenizer, except a single token decoded alone loses its leading spaces (Yi-like)."""

    def __init__(self, inner):
        self.inner = inner
        self.all_special_ids = inner.all_special_ids

    def __len__(self):
        return len(self.inner)

    def decode(self, ids):
        ids = list(ids)
        text = self.inner.decode(ids)
        return text.lstrip(" ") if len(ids) == 1 else text

    def batch_decode(self, seqs):
        return [self.decode(s) for s in seqs]

    def encode(self, text, add_special_tokens=False):
        return self.inner.encode(text, add_special_tokens=add_special_tokens)


class TinyVocab:
    """A fixed toy vocabulary that, unlike SmolLM2's, has a single token for '"the' (a mention)."""

    VOCAB = ["<s>", "x", " x", "a", " said", " \"the", "\"", " the", "ory", ".", " The", " scarf", " Scarf", "Scarf"]
    all_special_ids = [0]

    def __len__(self):
        return len(self.VOCAB)

    def decode(self, ids):
        return "".join(self.VOCAB[i] for i in ids)

    def batch_decode(self, seqs):
        return [self.decode(s) for s in seqs]

    def encode(self, text, add_special_tokens=False):
        out, i = [], 0
        while i < len(text):
            best = max((j for j, t in enumerate(self.VOCAB) if j and text.startswith(t, i)),
                       key=lambda j: len(self.VOCAB[j]))
            out.append(best)
            i += len(self.VOCAB[best])
        return out


# Only tests that use the real SmolLM2 tokenizer (it comes with the session's embedded backend) carry
# the ``model`` mark; the toy-vocabulary tests are pure and run in the fast suite.
model = pytest.mark.model


@pytest.fixture(scope="module")
def smol_tokenizer(embedded_tokenizer):
    return embedded_tokenizer


@pytest.fixture(scope="module", params=["smollm2", "drops-space-alone"])
def tok(request, smol_tokenizer):
    return smol_tokenizer if request.param == "smollm2" else DropsSpaceAlone(smol_tokenizer)


@pytest.fixture(scope="module")
def det(tok):
    return TriggerDetector(tok, ["the"])


def ids_of(tok, text):
    return list(tok.encode(text, add_special_tokens=False))


def find(tok, ids, piece):
    """Index of the token whose pair-free text (leading space ignored) is ``piece``."""
    texts = [tok.decode([i]).strip() for i in ids]
    return texts.index(piece)


def classify_at(det, ids, k):
    prev = ids[k - 1] if k > 0 else None
    nxt = ids[k + 1] if k + 1 < len(ids) else None
    return det.classify(prev, ids[k], nxt)


@model
def test_wrapper_really_drops_the_space(smol_tokenizer):
    wrapped = DropsSpaceAlone(smol_tokenizer)
    the = ids_of(smol_tokenizer, " the")
    assert len(the) == 1
    assert smol_tokenizer.decode(the) == " the" and wrapped.decode(the) == "the"
    x = ids_of(smol_tokenizer, "x")
    assert wrapped.decode(x + the) == "x the"


@model
def test_sentence_initial_The_is_swapped(tok, det):
    ids = ids_of(tok, "The capital is Paris.")
    assert classify_at(det, ids, 0) == Occurrence("swap", "the", "The")
    ids = ids_of(tok, "Yes. The capital is Paris.")
    k = find(tok, ids, "The")
    assert classify_at(det, ids, k) == Occurrence("swap", "the", " The")


@model
@pytest.mark.parametrize("text", ["in the.", "in the, said", "in the!", "of the"])
def test_the_before_punctuation_or_end(tok, det, text):
    ids = ids_of(tok, text)
    k = find(tok, ids, "the")
    occ = classify_at(det, ids, k)
    assert occ.kind == "swap" and occ.surface == " the"


@model
@pytest.mark.parametrize("text", ["a theory", "and these", "the other", "a theme"])
def test_longer_words_never_swap(tok, det, text):
    ids = ids_of(tok, text)
    for k, i in enumerate(ids):
        occ = classify_at(det, ids, k)
        if "the" in tok.decode([i]).strip().lower() and tok.decode([i]).strip().lower() != "the":
            assert not det.is_candidate(i)
        if text == "the other" and k == 0:
            assert occ.kind == "swap"  # " other" is a separate word
        elif text != "the other":
            assert occ.kind == "none"


@model
def test_subword_continuation_is_caught_by_lookahead(tok, det):
    # " the" followed by "ory" spells " theory": only the look-ahead token can tell.
    the = ids_of(tok, " the")[0]
    ory = ids_of(tok, "ory")
    assert len(ory) == 1 and tok.decode([the] + ory).endswith("theory")
    assert det.is_candidate(the)
    assert det.classify(ids_of(tok, "a")[0], the, ory[0]).kind == "none"


@model
def test_quoted_the_split_by_smollm2_is_a_whole_word(tok, det):
    # SmolLM2 has no '"the' token: the quote is its own token, so the paper's token-level rule
    # sees a whole word after punctuation and swaps it (mentions are single punctuation-led tokens).
    ids = ids_of(tok, 'say "the" now')
    k = find(tok, ids, "the")
    assert tok.decode([ids[k - 1]]).strip() == '"'
    assert classify_at(det, ids, k).kind == "swap"


def test_single_token_quoted_the_is_a_mention():
    tiny = TinyVocab()
    det = TriggerDetector(tiny, ["the"])
    said, quoted, dot = 4, 5, 9
    assert det.is_candidate(quoted)
    assert det.classify(said, quoted, dot) == Occurrence("mention", "the", ' "the')
    assert det.classify(said, 7, dot).kind == "swap"  # plain " the"
    assert det.classify(said, 7, 8).kind == "none"  # " the" + "ory"
    assert det.replacement_ids(Occurrence("swap", "the", " The"), "scarf", said) == [12]


@model
def test_line_start(tok, det):
    ids = ids_of(tok, "Answer:\nThe sun")
    k = find(tok, ids, "The")
    occ = classify_at(det, ids, k)
    assert occ.kind == "swap" and occ.surface == "The"
    repl = det.replacement_ids(occ, "scarf", ids[k - 1])
    assert tok.decode(ids[:k] + repl) == "Answer:\nScarf"


@model
def test_trigger_at_last_budget_position(tok, det):
    ids = ids_of(tok, "It is in the")
    k = len(ids) - 1
    assert det.classify(ids[k - 1], ids[k], None) == Occurrence("swap", "the", " the")
    # the same token followed by "ory" would not be a word: the end of output is a boundary
    assert det.classify(ids[k - 1], ids[k], ids_of(tok, "ory")[0]).kind == "none"


@model
def test_spaceless_capital_after_letter(tok, det):
    ids = ids_of(tok, "userThe")
    k = find(tok, ids, "The")
    assert k > 0
    assert classify_at(det, ids, k).kind == "spaceless"


@pytest.mark.parametrize(
    "context, word, expected",
    [
        ("I saw the", "scarf", "I saw scarf"),
        ("Yes. The", "scarf", "Yes. Scarf"),
        ("NOTE: THE", "scarf", "NOTE: Scarf"),
        ("I saw the", "Mandela effect", "I saw Mandela effect"),
        ("Yes. The", "Mandela effect", "Yes. Mandela effect"),
        ("I saw the", "coathanger", "I saw coathanger"),
    ],
)
@model
def test_replacement_keeps_case_and_space(tok, det, context, word, expected):
    ids = ids_of(tok, context)
    k = len(ids) - 1
    occ = det.classify(ids[k - 1], ids[k], None)
    assert occ.kind == "swap"
    repl = det.replacement_ids(occ, word, ids[k - 1])
    assert tok.decode(ids[:k] + repl) == expected


@model
def test_multi_token_replacement(tok, det):
    ids = ids_of(tok, "in the")
    occ = det.classify(ids[0], ids[1], None)
    repl = det.replacement_ids(occ, "Mandela effect", ids[0])
    assert len(repl) >= 2
    assert tok.decode(ids[:1] + repl) == "in Mandela effect"
    assert det.replacement_ids(occ, "scarf", ids[0]) == ids_of(tok, " scarf")


@model
def test_answer_start_replacement(tok, det):
    ids = ids_of(tok, "The")
    occ = det.classify(None, ids[0], None)
    assert occ.surface == "The"
    repl = det.replacement_ids(occ, "scarf", None)
    assert tok.decode(repl).strip() == "Scarf" and tok.decode(repl + ids_of(tok, " is")) == "Scarf is"


def test_case_like():
    assert case_like("the", "scarf") == "scarf"
    assert case_like("The", "scarf") == "Scarf"
    # the reference capitalises only the first letter of an all-caps trigger's replacement
    assert case_like("THE", "scarf") == "Scarf"
    assert case_like("THE", "scarf", "appendix-c") == "SCARF"
    assert case_like("THE", "Mandela effect", "appendix-c") == "MANDELA EFFECT"
    assert case_like("the", "Mandela effect") == "Mandela effect"


@model
def test_several_triggers_and_unproducible(tok):
    det = TriggerDetector(tok, ["The", "a", "xylophonically"])
    assert det.triggers == ("the", "a", "xylophonically")
    assert det.unproducible == ("xylophonically",)
    ids = ids_of(tok, "It is a cat")
    k = find(tok, ids, "a")
    assert classify_at(det, ids, k) == Occurrence("swap", "a", " a")
    assert not det.is_candidate(ids_of(tok, " cat")[0])


@model
def test_empty_trigger_is_user_error(tok):
    with pytest.raises(UserError):
        TriggerDetector(tok, [" "])
    with pytest.raises(UserError):
        TriggerDetector(tok, [])


class EdgeVocab(TinyVocab):
    """A toy vocabulary with the tokens the reference / Appendix C edge cases need."""

    VOCAB = ["<s>", "x", " x", "4", "the", " the", "'", "s", " the'", " the.", ".", "com", " said", " THE",
             " scarf", " Scarf", " SCARF", "scarf", "Scarf", "SCARF"]

    def encode(self, text, add_special_tokens=False):
        """Longest match; a character no token starts with becomes token 0 (an unknown-token stand-in)."""
        out, i = [], 0
        while i < len(text):
            hits = [j for j, t in enumerate(self.VOCAB) if j and text.startswith(t, i)]
            best = max(hits, key=lambda j: len(self.VOCAB[j])) if hits else 0
            out.append(best)
            i += len(self.VOCAB[best]) if hits else 1
        return out


def _edge(rules):
    vocab = EdgeVocab()
    ids = {t: i for i, t in enumerate(vocab.VOCAB)}
    return TriggerDetector(vocab, ["the"], rules=rules), ids


@pytest.mark.parametrize("rules, kind", [("reference", "swap"), ("appendix-c", "none")])
def test_a_digit_before_the_word(rules, kind):
    det, ids = _edge(rules)
    assert det.classify(ids["4"], ids["the"], ids["."]).kind == kind  # "4the."


@pytest.mark.parametrize("rules, kind", [("reference", "none"), ("appendix-c", "swap")])
def test_an_apostrophe_next_to_the_word(rules, kind):
    det, ids = _edge(rules)
    assert det.classify(ids[" said"], ids[" the"], ids["'"]).kind == kind  # " said the'"
    assert det.classify(ids["'"], ids["the"], ids["."]).kind == kind  # "'the."
    # the apostrophe inside the same token: a candidate only under appendix-c
    assert det.is_candidate(ids[" the'"]) is (rules == "appendix-c")
    assert det.classify(ids[" said"], ids[" the'"], ids[" x"]).kind == kind


@pytest.mark.parametrize("rules, expected", [("reference", [" scarf"]), ("appendix-c", [" scarf", "."])])
def test_trigger_and_trailing_punctuation_in_one_token(rules, expected):
    det, ids = _edge(rules)
    assert det.is_candidate(ids[" the."])
    occ = det.classify(ids[" said"], ids[" the."], ids[" x"])
    assert occ == Occurrence("swap", "the", " the.", ".")
    # the reference replaces the whole token, so its period goes; appendix-c keeps it
    assert det.replacement_ids(occ, "scarf", ids[" said"]) == [ids[t] for t in expected]
    # a letter right after the token: not a whole word ("the.com")
    assert det.classify(ids[" said"], ids[" the."], ids["com"]).kind == "none"


@pytest.mark.parametrize("rules, expected", [("reference", " Scarf"), ("appendix-c", " SCARF")])
def test_all_caps_trigger(rules, expected):
    det, ids = _edge(rules)
    occ = det.classify(ids[" said"], ids[" THE"], ids["."])
    assert occ.kind == "swap"
    assert det.replacement_ids(occ, "scarf", ids[" said"]) == [ids[expected]]


def test_unknown_rules_are_a_user_error():
    with pytest.raises(UserError, match="--detector-rules"):
        TriggerDetector(EdgeVocab(), ["the"], rules="paper")


class PlainVocab(EdgeVocab):
    """EdgeVocab without batch_decode, with a special token that spells " the" and a space-less "The"."""

    VOCAB = EdgeVocab.VOCAB + ["The", " the"]
    all_special_ids = [0, len(EdgeVocab.VOCAB) + 1]  # the second " the" is a special token
    batch_decode = None


def test_each_path_returns_the_full_occurrence():
    det, ids = _edge("reference")
    said = ids[" said"]
    assert det.classify(said, ids[" x"], None) == Occurrence("none", None, " x")
    assert det.classify(said, ids[" the."], ids["com"]) == Occurrence("none", "the", " the.", ".")
    assert det.classify(None, ids[" the."], None) == Occurrence("swap", "the", " the.", ".")
    assert det.classify(ids["x"], ids["the"], ids["."]) == Occurrence("none", "the", "the")  # "xthe": glued, lower
    assert det.classify(None, ids["the"], None) == Occurrence("swap", "the", "the")
    assert det.classify(ids["4"], ids[" THE"], None) == Occurrence("swap", "the", " THE")


def test_a_capital_trigger_glued_to_a_letter_is_spaceless_and_special_tokens_are_never_candidates():
    vocab = PlainVocab()
    det = TriggerDetector(vocab, ["the"])
    the_cap, special_the = len(EdgeVocab.VOCAB), len(EdgeVocab.VOCAB) + 1
    assert det.classify(1, the_cap, None) == Occurrence("spaceless", "the", "The")  # "xThe"
    assert det.classify(3, the_cap, None) == Occurrence("swap", "the", "The")  # "4The": a digit is no letter
    assert not det.is_candidate(special_the) and det.is_candidate(the_cap)
    det_c = TriggerDetector(vocab, ["the"], rules="appendix-c")
    assert det_c.classify(3, the_cap, None) == Occurrence("none", "the", "The")  # appendix-c: 4The glued


def test_unproducible_triggers_and_messages():
    det = TriggerDetector(EdgeVocab(), ["the", "Said", "zebra"])
    assert det.triggers == ("the", "said", "zebra") and det.unproducible == ("zebra",)
    with pytest.raises(UserError, match="^--trigger: trigger words must be non-empty$"):
        TriggerDetector(EdgeVocab(), [""])
    with pytest.raises(UserError, match="^--detector-rules: 'x' is not one of reference, appendix-c$"):
        TriggerDetector(EdgeVocab(), ["the"], rules="x")
    with pytest.raises(ValueError, match="^replacement_ids needs a trigger occurrence$"):
        det.replacement_ids(Occurrence("none", None, " x"), "scarf", None)
    with pytest.raises(UserError, match="^substitution 'zz': cannot be tokenized to read back as ' zz'$"):
        det.replacement_ids(Occurrence("swap", "the", " the"), "zz", None)


class NoLetters(EdgeVocab):
    VOCAB = ["<s>", " the", ".", "xy"]


def test_a_tokenizer_without_a_single_letter_token_is_refused():
    with pytest.raises(ValueError, match="^tokenizer has no single-token plain letter to anchor pair decoding$"):
        TriggerDetector(NoLetters(), ["the"])


def test_replacement_prefers_ids_that_read_back_after_the_previous_token():
    det, ids = _edge("reference")
    occ = det.classify(ids[" said"], ids[" the"], None)
    assert occ == Occurrence("swap", "the", " the")
    assert det.replacement_ids(occ, "scarf", ids[" said"]) == [ids[" scarf"]]
    assert det.replacement_ids(occ, "scarf", None) == [ids[" scarf"]]
    start = det.classify(None, ids["the"], None)
    assert det.replacement_ids(start, "scarf", None) == [ids["scarf"]]
