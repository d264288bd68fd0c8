"""Token-level trigger-word detection for Sleight of Word (protocol Appendix C).

Why token level: the swap happens while the model decodes, one token at a time, so the decision
"is this token the whole word *the*?" must be made from token ids, not from a regex over finished
text. A token is a *candidate* when its text, stripped of leading whitespace, equals a trigger
case-insensitively (an O(1) set lookup precomputed over the vocabulary). A candidate is confirmed
by pair-decoding it with each neighbour, because some tokenizers (Yi) drop the leading space when a
token is decoded alone; decoding ``(prev, tok)`` and ``(tok, next)`` shows the real separators.

Kinds of occurrence:

* ``swap``      whole word: a non-alphanumeric character (or the start of the answer) before it
                and a non-alphanumeric character (or the end of the output) after it.
* ``mention``   a trigger led by punctuation *inside one token* (the token ``"the``): the model
                talking about the word, deliberately left alone (Appendix C, mention vs. use).
                When the quote is a separate token (SmolLM2 splits ``"the`` into ``"`` + ``the``),
                the paper's token-level rule sees a whole word after punctuation and swaps it.
* ``spaceless`` a capitalised trigger glued to a preceding letter (``userThe``): the intended
                word, but not a whole word in the text; recorded, not swapped.
* ``none``      anything else, including subword continuations (``theory``, ``bathe``).

Two rule sets (``rules``), because Appendix C and the reference implementation
(``src/awareness/tokens.py`` of fractalego/Sleight-of-Word) disagree on a few edges. ``reference``
(the default) follows the code that produced the paper's numbers; ``appendix-c`` keeps tamperbench
v1's reading of the appendix's whole-word rule:

===============================================  ======================  ======================
case                                             reference (default)     appendix-c
===============================================  ======================  ======================
digit before the word (``4the``)                 swapped                 not swapped
apostrophe after the word (``the'``)             not swapped             swapped
apostrophe before the word (``'the``, 2 tokens)  not swapped             swapped
one token = trigger + trailing punctuation       candidate; replacement  candidate; replacement
(`` the.``)                                      drops the punctuation   keeps it
all-caps trigger (``THE`` -> ...)                ``Scarf``               ``SCARF``
===============================================  ======================  ======================

The last row is also its own option, ``replacement_case`` (``--replacement-case``): ``first-letter``
(the reference's ``encode_replacement``: capitalise the first letter when the trigger's is upper case)
or ``pattern`` (follow the trigger's case pattern: the->scarf, The->Scarf, THE->SCARF). Unset, it
follows the rules: ``first-letter`` under ``reference``, ``pattern`` under ``appendix-c``.

The reference treats a letter or an apostrophe as part of a word; appendix-c a letter, digit or
underscore.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from tamperbench.errors import UserError

Kind = Literal["swap", "mention", "spaceless", "none"]
Rules = Literal["reference", "appendix-c"]
RULES: tuple[str, ...] = ("reference", "appendix-c")
ReplacementCase = Literal["first-letter", "pattern"]
REPLACEMENT_CASES: tuple[str, ...] = ("first-letter", "pattern")


def default_case(rules: str) -> str:
    """The replacement case a rule set implies when ``replacement_case`` is not given."""
    return "pattern" if rules == "appendix-c" else "first-letter"

_MARKERS = "\u2581\u0120"  # SentencePiece / byte-level space markers, in case a decoder leaves them


@dataclass(frozen=True)
class Occurrence:
    """What one emitted token is, with respect to the trigger words."""

    kind: Kind
    trigger: str | None  # canonical lower-case trigger matched
    surface: str  # the token's text as it appears in context (e.g. " The", " the.")
    trail: str = ""  # text after the trigger inside the same token (e.g. "." of " the.")


def _strip_lead(text: str) -> str:
    return text.lstrip().lstrip(_MARKERS).lstrip()


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _glues(ch: str, rules: str) -> bool:
    """Whether ``ch`` next to the word makes it part of a longer word under ``rules``."""
    if rules == "reference":
        return ch[:1].isalpha() or ch[:1] == "'"
    return _is_word_char(ch)


def case_like(surface_core: str, word: str, rules: str = "reference", case: str | None = None) -> str:
    """Give ``word`` the trigger's case: the->scarf, The->Scarf; THE->Scarf (``first-letter``, the
    reference's) or SCARF (``pattern``); ``case`` None follows ``rules`` (:func:`default_case`).

    Lower-case triggers keep the word as listed (so the entity stays "Mandela effect").
    """
    if (case or default_case(rules)) == "pattern" and len(surface_core) > 1 and surface_core.isupper():
        return word.upper()
    if surface_core[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


class TriggerDetector:
    """Classifies emitted tokens as trigger occurrences and builds case-matched replacements."""

    def __init__(self, tokenizer, triggers: Sequence[str] = ("the",), rules: Rules = "reference",
                 replacement_case: str | None = None):
        cleaned = [t.strip().lower() for t in triggers]
        if not cleaned or any(not t for t in cleaned):
            raise UserError("--trigger: trigger words must be non-empty")
        if rules not in RULES:
            raise UserError(f"--detector-rules: '{rules}' is not one of {', '.join(RULES)}")
        if replacement_case is not None and replacement_case not in REPLACEMENT_CASES:
            raise UserError(f"--replacement-case: '{replacement_case}' is not one of {', '.join(REPLACEMENT_CASES)}")
        self.rules = rules
        self.case = replacement_case or default_case(rules)
        self.tokenizer = tokenizer
        self.triggers: tuple[str, ...] = tuple(dict.fromkeys(cleaned))
        trig = set(self.triggers)
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        vocab = len(tokenizer)
        texts = _decode_each(tokenizer, vocab)
        self._whole: dict[int, str] = {}  # id -> trigger, token is [ws]trigger
        self._mention: dict[int, str] = {}  # id -> trigger, token is [ws]punct+trigger
        self._trail: dict[int, str] = {}  # id -> text after the trigger, token is [ws]trigger+punct
        for i, text in enumerate(texts):
            if i in special:
                continue
            core = _strip_lead(text)
            low = core.lower()
            if low in trig:
                self._whole[i] = low
                continue
            hit = next((t for t in self.triggers if len(low) > len(t) and low.startswith(t)
                        and not _glues(core[len(t)], rules)), None)
            if hit is not None:
                self._whole[i] = hit
                self._trail[i] = core[len(hit):]
                continue
            for t in self.triggers:
                if len(low) > len(t) and low.endswith(t):
                    lead = core[: -len(t)]
                    if all(not _is_word_char(c) and not c.isspace() for c in lead):
                        self._mention[i] = t
                        break
        self._candidates = frozenset(self._whole) | frozenset(self._mention)
        # The text each candidate contributes after an ordinary letter, leading space included:
        # decoding after an anchor defeats tokenizers that drop the space when decoding alone.
        self._anchor = _anchor_id(tokenizer)
        self._anchor_text = self._decode([self._anchor])
        self._surface = {i: self._after_anchor([i]) for i in self._candidates}
        found = set(self._whole.values())
        # Triggers that can never be swapped: no vocabulary token spells them as a whole word.
        self.unproducible: tuple[str, ...] = tuple(t for t in self.triggers if t not in found)

    # -- detection -------------------------------------------------------------------------
    def is_candidate(self, token_id: int) -> bool:
        return token_id in self._candidates

    def classify(self, prev_id: int | None, token_id: int, next_id: int | None) -> Occurrence:
        """Classify ``token_id`` given its neighbours (None = answer start / end of output)."""
        if token_id not in self._candidates:
            return Occurrence("none", None, self._decode([token_id]))
        trigger = self._whole.get(token_id) or self._mention[token_id]
        trail = self._trail.get(token_id, "")
        n = len(trigger)
        # Left side: decode with the predecessor so a dropped leading space reappears.
        surface = self._surface[token_id]
        body = surface[: len(surface) - len(trail)]
        if prev_id is None:
            core, before = body[-n:], ""
        else:
            pair = self._decode([prev_id, token_id])
            if trail and not pair.endswith(trail):
                return Occurrence("none", trigger, surface, trail)  # decoder surprise: do not swap blind
            pair = pair[: len(pair) - len(trail)]
            core = pair[-n:]
            before = pair[-n - 1] if len(pair) > n else ""
        # Right side: decode with the successor; a letter right after the token means a longer word.
        if next_id is not None:
            after_pair = _strip_lead(self._decode([token_id, next_id]))
            lead_len = len(_strip_lead(self._decode([token_id])))
            after = after_pair[lead_len : lead_len + 1]
            if after and _glues(after, self.rules):
                return Occurrence("none", trigger, surface, trail)
        if token_id in self._mention:
            return Occurrence("mention", trigger, surface)
        if core.lower() != trigger:  # decoder surprise (e.g. partial UTF-8): do not swap blind
            return Occurrence("none", trigger, surface, trail)
        if before and _glues(before, self.rules):
            kind: Kind = "spaceless" if core[:1].isupper() and before.isalpha() else "none"
            return Occurrence(kind, trigger, surface, trail)
        return Occurrence("swap", trigger, surface, trail)

    # -- replacement -----------------------------------------------------------------------
    def replacement_ids(self, occ: Occurrence, word: str, prev_id: int | None) -> list[int]:
        """Token ids for ``word`` in the trigger's place: same leading whitespace, same case pattern.

        Candidates are checked by decoding ``prev + replacement`` against the expected text, since
        some tokenizers add a prefix space of their own when encoding.
        """
        if occ.trigger is None:
            raise ValueError("replacement_ids needs a trigger occurrence")
        n = len(occ.trigger)
        body = occ.surface[: len(occ.surface) - len(occ.trail)]
        core = body[-n:]
        ws = body[: len(body) - n]
        # The reference replaces the whole token, so punctuation inside it goes; appendix-c keeps it.
        cased = case_like(core, word, self.rules, self.case) + (occ.trail if self.rules == "appendix-c" else "")
        candidates = [self._encode(ws + cased)]
        if ws:
            candidates.append(self._encode(cased))  # tokenizers that add their own prefix space
        # Encode after the anchor and drop it: gets a space-less start from SentencePiece too.
        anchored = self._encode(self._anchor_text + ws + cased)
        if anchored[:1] == [self._anchor]:
            candidates.append(anchored[1:])
        expected = ws + cased
        for ids in candidates:
            if ids and self._after_anchor(ids) == expected:
                if prev_id is None or self._decode([prev_id] + ids).endswith(expected):
                    return ids
        for ids in candidates:
            if ids and self._after_anchor(ids) == expected:
                return ids
        raise UserError(f"substitution {word!r}: cannot be tokenized to read back as {expected!r}")

    # -- helpers ---------------------------------------------------------------------------
    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def _after_anchor(self, ids: list[int]) -> str:
        text = self._decode([self._anchor] + ids)
        if text.startswith(self._anchor_text):
            return text[len(self._anchor_text):]
        return self._decode(ids)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))


def _decode_each(tokenizer, vocab: int) -> list[str]:
    """Decode every token id alone (batched when the tokenizer allows it)."""
    batch = getattr(tokenizer, "batch_decode", None)
    if batch is not None:
        return list(batch([[i] for i in range(vocab)]))
    return [tokenizer.decode([i]) for i in range(vocab)]


def _anchor_id(tokenizer) -> int:
    """A plain-letter token to decode in front of others (see TriggerDetector._surface)."""
    for probe in ("x", "a", "z"):
        ids = list(tokenizer.encode(probe, add_special_tokens=False))
        if len(ids) == 1 and tokenizer.decode(ids).strip() == probe:
            return ids[0]
    raise ValueError("tokenizer has no single-token plain letter to anchor pair decoding")
