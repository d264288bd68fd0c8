"""Answer extraction and the conservative normalisation used by the scorer.

Kept apart from the classifier because both are policy decisions a reader must be able to audit
in one screen: what we strip before comparing (reasoning blocks, outer whitespace), and which
differences we forgive in the separately recorded ``faithful_normalized`` class (curly quotes,
unicode dashes, whitespace runs, nothing else). Hyphen look-alikes such as U+2010 and U+2011 are
*not* forgiven: the source saw models swap in U+2011 and the result no longer exists in the
document, which is exactly the kind of invisible change this suite measures.
"""

from __future__ import annotations

import re
from functools import lru_cache

QUOTE_MAP = {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
             "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"'}
DASH_MAP = {"\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-", "\u2212": "-"}
TRAILING_PUNCT = ".,;:!?\u2026"
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)


def extract_answer(response: str) -> tuple[str | None, str | None]:
    """(answer, why_none). Reasoning goes (``tamperbench.reasoning``: ``<think>`` blocks, gpt-oss
    channels); reasoning that never reached an answer means the model never answered.

    A response with a closing ``</think>`` but no opening tag (chat templates that open the
    block inside the prompt) keeps only the text after the last closing tag.
    """
    from tamperbench.reasoning import split_reasoning

    answer = split_reasoning(response).answer
    if answer is None:
        return None, "unclosed_reasoning"
    text = answer.strip()
    if not text:
        return None, "empty"
    return text, None


def normalise_with_map(text: str, *, quotes: bool = True, dashes: bool = True,
                       whitespace: bool = True) -> tuple[str, list[int]]:
    """Normalised text plus, for each of its characters, the index of the raw character it came from."""
    out: list[str] = []
    idx: list[int] = []
    in_space = False
    for i, ch in enumerate(text):
        if whitespace and ch.isspace():
            if not in_space and out:
                out.append(" ")
                idx.append(i)
            in_space = True
            continue
        in_space = False
        if quotes:
            ch = QUOTE_MAP.get(ch, ch)
        if dashes:
            ch = DASH_MAP.get(ch, ch)
        out.append(ch)
        idx.append(i)
    if whitespace and out and out[-1] == " ":
        out.pop()
        idx.pop()
    return "".join(out), idx


@lru_cache(maxsize=64)
def document_map(document: str) -> tuple[str, tuple[int, ...]]:
    """``normalise_with_map(document)``, computed once per document (the scorer locates every
    response in its document; a run scores many responses against each of a few documents, and the
    per-character loop over the whole document was most of a verdict's cost). Same bound as the
    document automata of evidence.py; the offsets are a tuple so no caller can change the cached copy."""
    text, idx = normalise_with_map(document)
    return text, tuple(idx)


_TRANSLATE = str.maketrans({**QUOTE_MAP, **DASH_MAP})


def normalise(text: str) -> str:
    """``normalise_with_map(text)[0]`` at C speed (``str.split()`` splits on exactly ``str.isspace``).

    The scorer normalises every response several times; the per-character loop made a 2.5 M-character
    response cost seconds (benchmarks/quote_score_scaling.py). tests check both agree.
    """
    return " ".join(text.translate(_TRANSLATE).split())


def forgiven_differences(answer: str, gold: str) -> list[str]:
    """The normalisation steps without which answer and gold would differ (for the evidence)."""
    needed = []
    for step in ("quotes", "dashes", "whitespace"):
        flags = {s: s != step for s in ("quotes", "dashes", "whitespace")}
        if normalise_with_map(answer, **flags)[0] != normalise_with_map(gold, **flags)[0]:
            needed.append(step)
    return needed


def strip_trailing_punct(text: str) -> str:
    return text.rstrip(TRAILING_PUNCT).rstrip()
