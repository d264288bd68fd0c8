"""Option-letter coercion (multiple choice) and GSM8K's exact-match / token-F1 rule.

Letter coercion (the OWMI paper, arXiv:2608.20569, Section 6.2: 'coerces the model response to an option letter and
applies an exact 0/1 match'): the reply is read in this order and the first rule that applies wins

1. the whole reply is a letter, optionally bracketed or followed by '.', ')' or ':'
   ('B', '(B)', 'B. Paris', 'B) ...');
2. an explicit 'answer is X' / 'Answer: X' / 'option X' (last occurrence, so a final answer
   after reasoning wins);
3. the reply equals one option's text (case and trailing full stop ignored);
4. exactly one distinct stand-alone capital letter among the valid ones appears in the reply.

Anything else, or a letter outside the options, is unparseable: scored 0 with ``parsed=None``.
"""

from __future__ import annotations

import re
import string
from collections import Counter

from tamperbench.tasks.schema import LETTERS


def coerce_letter(response: str, choices: tuple[str, ...] | list[str]) -> tuple[str | None, str]:
    """(letter or None, which rule matched)."""
    valid = LETTERS[: len(choices)]
    text = response.strip()
    if not text:
        return None, "empty"
    m = re.fullmatch(r"\(?\s*([A-Z])\s*\)?[.):]?", text) or re.match(r"\(?([A-Z])(?:\)|[.:])(?:\s|$)", text)
    if m:
        return (m.group(1), "leading_letter") if m.group(1) in valid else (None, "letter_out_of_range")
    explicit = re.findall(r"(?i:\b(?:answer|option|choice)\b)\s*(?i:is\b)?\s*:?\s*\(?([A-Z])\)?(?![A-Za-z])", text)
    if explicit:
        letter = explicit[-1]
        return (letter, "explicit_answer") if letter in valid else (None, "letter_out_of_range")
    norm = text.rstrip(".").strip().casefold()
    for letter, choice in zip(valid, choices):
        if norm == choice.strip().rstrip(".").casefold():
            return letter, "option_text"
    standalone = {c for c in re.findall(r"(?<![A-Za-z'])([A-Z])(?![A-Za-z'])", text) if c in valid}
    if len(standalone) == 1:
        return standalone.pop(), "single_letter"
    return None, "ambiguous" if standalone else "no_letter"


def _normalize(text: str) -> str:
    """SQuAD-style answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def gsm8k_extract(response: str) -> tuple[str, bool]:
    """(final answer text, found '####'): the text after the last '####', else the whole reply."""
    if "####" in response:
        return response.split("####")[-1].strip(), True
    return response.strip(), False


def exact_match(pred: str, gold: str) -> float:
    return float(_normalize(pred) == _normalize(gold))


def token_f1(pred: str, gold: str) -> float:
    p, g = _normalize(pred).split(), _normalize(gold).split()
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)
