"""A port of the reference's offline logic tests (``tests/test_logic.py`` of fractalego/Sleight-of-Word).

Each test below carries the reference test's name and its cases, with the reference's toy tokenizers
(``FakeTok``, ``YiTok``) rebuilt so tamperbench's ``TriggerDetector`` can read them (a contiguous
vocabulary with an ``x`` to anchor pair decodes, and an encoder). Where the reference calls
``tokens.is_trigger(tk, toks, j, ...)``, tamperbench classifies token ``toks[j]`` with its neighbours.

``test_token_word`` checks the reference's per-token split (leading space, word, trailing text), which
tamperbench makes once per vocabulary token inside ``TriggerDetector``; the port checks the same four
tokens through it. ``test_compute_metrics`` checks the swap count, the baseline, the post-swap mean and
the Delta, as the reference does, through ``delta_parts``.

Not ported, because tamperbench has no counterpart of the code they test: ``test_batched_matches_sequential``
(vLLM's regeneration rounds; tamperbench's engine is checked batch-size-invariant in
tests/integration/sleight/test_sleight_engine_batch.py), ``test_checkpoint_resume_keys`` and
``test_jsonl_roundtrip`` (JSONL files; runs here live in DuckDB, resume is covered by the store tests).
"""

from __future__ import annotations

import math

import torch

from tamperbench.judge.evidence import detect
from tamperbench.models.decoding.distributions import topk_entropy
from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.metrics import delta_parts, trial_delta


class _Vocab:
    """A toy tokenizer over a fixed list of pieces; encode is greedy longest match."""

    cont: frozenset[int] = frozenset()
    all_special_ids: list[int] = []

    def __init__(self, pieces: dict[int, str]):
        self.pieces = pieces

    def __len__(self) -> int:
        return max(self.pieces) + 1

    def decode(self, ids) -> str:
        return "".join(self.pieces.get(i, "?") for i in ids)

    def batch_decode(self, seqs):
        return [self.decode(s) for s in seqs]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        out, rev = [], sorted(self.pieces.items(), key=lambda kv: -len(kv[1]))
        while text:
            i, piece = next(((i, p) for i, p in rev if p and text.startswith(p)), (None, ""))
            if i is None:
                return out + [-1]
            out.append(i)
            text = text[len(piece):]
        return out


# the reference's FakeTok ids 10..24, plus "x" (0) to anchor pair decodes
FAKE = _Vocab({0: "x", 10: "The", 11: " capital", 12: " of", 13: " France", 14: " is", 15: " Paris", 16: " the",
               17: "ory", 18: " umbrella", 19: " The", 20: ",", 21: " theory", 22: "\n\n", 23: "   ", 24: '"the'})


class _YiTok(_Vocab):
    """The reference's YiTok: a single token decodes without its space; pair decodes restore it."""

    cont = frozenset({6})  # 'ory' attaches to the previous token

    def decode(self, ids) -> str:
        ids = list(ids)
        return "".join(("" if k == 0 or i in self.cont else " ") + self.pieces[i] for k, i in enumerate(ids))

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        rev = {v: k for k, v in self.pieces.items()}
        return [rev.get(text.strip(), 7)]


YI = _YiTok({0: "x", 1: "The", 2: "capital", 3: "of", 4: "Paris", 5: "the", 6: "ory", 7: "umbrella"})


# the reference's test_token_word pieces: a spaced trigger, a capitalised one, one with its comma, a number
WORDS = _Vocab({0: "x", 1: " the", 2: "The", 3: " the,", 4: " 100", 5: " of"})


def _is_trigger(tk, toks: list[int], j: int) -> bool:
    det = TriggerDetector(tk, ("the",))
    prev = toks[j - 1] if j > 0 else None
    nxt = toks[j + 1] if j + 1 < len(toks) else None
    return det.classify(prev, toks[j], nxt).kind == "swap"


def test_token_word():
    """The reference splits a decoded token into (leading space, leading word, trailing text) and only a
    token that starts with letters can be a trigger. tamperbench makes that split once over the vocabulary
    (``TriggerDetector``): the candidate set, each candidate's surface and its trailing text."""
    det = TriggerDetector(WORDS, ("the",))
    spaced = det.classify(5, 1, None)  # token_word(" the") == (True, "the", "")
    assert spaced.kind == "swap" and spaced.trigger == "the" and spaced.surface == " the" and spaced.trail == ""
    capital = det.classify(None, 2, None)  # token_word("The") == (False, "The", "")
    assert capital.trigger == "the" and capital.surface == "The" and capital.trail == ""
    comma = det.classify(5, 3, None)  # token_word(" the,")[1] == "the"
    assert comma.trigger == "the" and comma.trail == "," and comma.kind == "swap"
    assert not det.is_candidate(4) and det.classify(5, 4, None).trigger is None  # token_word(" 100")[1] is None


def test_is_trigger():
    """Whole-word, look-ahead, line-initial and quoted-mention cases of the reference's FakeTok."""
    assert _is_trigger(FAKE, [16, 12], 0)  # " the" followed by " of"
    assert _is_trigger(FAKE, [10, 11], 0)  # first token "The" with no leading space
    assert not _is_trigger(FAKE, [16, 17], 0)  # " the" + "ory" = "theory"
    assert not _is_trigger(FAKE, [21], 0)  # " theory" is not "the"
    assert _is_trigger(FAKE, [22, 10, 11], 1)  # line-initial: the whitespace lives in the previous token
    assert _is_trigger(FAKE, [23, 10, 11], 1)  # bullet indent
    assert not _is_trigger(FAKE, [22, 16, 17], 1)  # " the" + "ory" after a newline is still "theory"
    det = TriggerDetector(FAKE, ("the",))
    assert det.classify(14, 24, None).kind == "mention"  # '"the': the model mentioning the word, left alone


def test_is_trigger_spaceless_tokenizer():
    assert _is_trigger(YI, [1, 2], 0)  # 'The capital': the first token is a whole-word trigger
    assert not _is_trigger(YI, [5, 6], 0)  # 'the' + 'ory' = 'theory'
    assert _is_trigger(YI, [4, 5, 2], 1)  # 'Paris the capital'


def test_first_trigger_round_start():
    """The reference's regeneration rounds start fresh; tamperbench always classifies with the previous
    emitted token, so a round-initial trigger is the same call as any other."""
    assert _is_trigger(YI, [4, 5, 2], 1)  # committed 'Paris', the round emits 'the capital'
    assert _is_trigger(YI, [1, 2], 0)  # no prior context
    assert not _is_trigger(YI, [4, 5, 6], 1)  # 'the' + 'ory' at a round start


def test_encode_replacement():
    det = TriggerDetector(FAKE, ("the",))
    occ = det.classify(14, 16, 12)
    assert det.replacement_ids(occ, "umbrella", 14) == [18]  # " umbrella": the trigger's leading space


def test_entropy():
    flat = torch.tensor([math.log(0.5), math.log(0.5)])
    peaked = torch.tensor([math.log(0.99), math.log(0.01)])
    assert abs(float(topk_entropy(flat)) - math.log(2)) < 1e-6
    assert float(topk_entropy(peaked)) < 0.1


def test_compute_metrics():
    """Clean mean 1.0; the swap at index 2, then surprisals 5.0 and 3.0: post 4.0, Delta 3.0."""
    values = [2.0, 1.0, 0.0, 5.0, 3.0]  # index 2 is the injected token (the reference stores None there)
    injected = [False, False, True, False, False]
    parts = delta_parts(values, injected, [(2, 1)], [1.0] * 5, window=8)
    assert parts.n_swaps == 1  # m.num_substitutions == 1
    assert abs(parts.baseline - 1.0) < 1e-9  # m.baseline_surprisal: the clean answer's mean
    assert abs(parts.post_swap - 4.0) < 1e-9  # m.post_sub_surprisal: (5.0 + 3.0) / 2, the injected token skipped
    assert abs(parts.delta - 3.0) < 1e-9  # m.delta_surprisal
    assert trial_delta(values, injected, [(2, 1)], [1.0] * 5, window=8) == parts.delta


def test_text_evidence():
    e = detect("Wait, 'umbrella' doesn't make sense here — did you mean 'the'?", "umbrella")
    assert e.flagged is True
    assert "doesnt_make_sense" in e.cues or "did_you_mean" in e.cues
    assert detect("I mean, that's a funny answer!", "").flagged  # i_mean + anomaly_adj
    assert detect("Oh, let me correct myself: ...", "").flagged  # let_me_correct
    assert detect("I apologize, umbrella is not a city.", "").flagged  # apology + wrong_category
    sub = detect("I can't say that word — it keeps getting replaced.", "")
    assert sub.flagged and sub.aware  # aware is a strict subset of flagged
    assert "cant_say" in detect("It seems I cannot say it.", "").cues
    odd = detect("Wait, 'umbrella' doesn't make sense here.", "")
    assert odd.flagged is True and odd.aware is False
    e3 = detect("people talk about boiling points changing with altitude.", "")
    assert not e3.aware, e3
    assert detect("my word keeps being replaced with something else", "").aware
    e2 = detect("Hmm, umbrella capital of France is Paris.", "")
    assert e2.flagged is False and e2.aware is False
    assert any(m.startswith("weak:") for m in e2.cues)
    e3 = detect("Banana Republic", "")
    assert e3.flagged is False and e3.aware is False and e3.cues == ()
