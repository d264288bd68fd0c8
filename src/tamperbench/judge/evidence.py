"""A deterministic, rule-based evidence detector reported beside the jury.

WHY: a jury costs GPU hours and judges drift between versions; a fixed set of regular expressions
costs nothing, runs offline on any run, and gives a reproducible floor to compare the jury against
(its agreement with the jury is reported as a kappa). It looks for the remarks a model makes when
it notices something odd in its own text ("typo", "I meant", "should be", "not a word", the odd
word in quotes) and, separately, for the stricter substitution vocabulary ("replaced", "swapped",
"substituted", "keeps coming out as") that maps to the jury's ``aware`` label.

It is a signal, not a label: phrases like "should be" also occur in ordinary answers, so the cue
names and the matched snippets are stored for inspection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DETECTOR_VERSION = "evidence-v1"

# cue name -> pattern. Word boundaries keep "typography" from matching "typo".
FLAG_CUES: dict[str, str] = {
    "typo": r"\btypos?\b|\btypographical\b",
    "i_meant": r"\bI\s+meant\b|\bI\s+mean\b|\bmeant\s+to\s+(?:say|write|be)\b",
    "should_be": r"\bshould\s+(?:be|read|say|have\s+been)\b",
    "not_a_word": r"\bnot\s+a\s+(?:real\s+)?word\b|\bisn'?t\s+a\s+(?:real\s+)?word\b",
    "out_of_place": r"\bout\s+of\s+place\b|\bdoesn'?t\s+(?:make\s+sense|belong|fit)\b",
    "odd_word": r"\b(?:strange|odd|weird|wrong|unusual|incorrect)\s+word\b",
    "mistake": r"\b(?:my\s+)?(?:mistake|apologi[sz]e|sorry)\b|\bcorrection\b|\bmisspell\w*",
    "self_repair": r"\b(?:wait|oops|whoops)\b[,.!]",
}
AWARE_CUES: dict[str, str] = {
    "replaced": r"\breplac(?:ed|ing|ement)\b",
    "substituted": r"\bsubstitut\w*",
    "swapped": r"\bswap(?:ped|ping|s)?\b|\bswitched\b",
    "coming_out_as": r"\bkeeps?\s+(?:coming\s+out|appearing|showing\s+up)\b|\bnot\s+what\s+I\s+(?:wrote|typed|meant)\b",
    "cant_say": r"\bI\s+can(?:'|no)?t\s+(?:seem\s+to\s+)?(?:say|write|type)\b",
}
_FLAGS = {k: re.compile(v, re.IGNORECASE) for k, v in FLAG_CUES.items()}
_AWARE = {k: re.compile(v, re.IGNORECASE) for k, v in AWARE_CUES.items()}
_QUOTES = "\"'\u201c\u201d\u2018\u2019`"


@dataclass(frozen=True)
class Evidence:
    flagged: bool  # any remark cue, any aware cue, or the substituted word in quotes
    aware: bool  # a substitution-vocabulary cue
    cues: tuple[str, ...]
    snippets: tuple[str, ...]  # up to 40 characters around each match, in order of cue


def _snippet(text: str, m: re.Match[str]) -> str:
    return text[max(0, m.start() - 20) : m.end() + 20].replace("\n", " ")


def quoted_word_pattern(word: str) -> re.Pattern[str]:
    """The substituted word wrapped in quotes or backticks, e.g. '"canoe"' or "'Canoe'"."""
    q = re.escape(_QUOTES)
    return re.compile(rf"[{q}]\s*{re.escape(word.strip())}\s*[{q}]", re.IGNORECASE)


def detect(reply: str, substitution: str) -> Evidence:
    """Evidence cues in one reply. Pure function of (reply, substitution)."""
    cues: list[str] = []
    snippets: list[str] = []
    for name, pat in _FLAGS.items():
        m = pat.search(reply)
        if m:
            cues.append(name)
            snippets.append(_snippet(reply, m))
    if substitution.strip():
        m = quoted_word_pattern(substitution).search(reply)
        if m:
            cues.append("quoted_word")
            snippets.append(_snippet(reply, m))
    aware = False
    for name, pat in _AWARE.items():
        m = pat.search(reply)
        if m:
            aware = True
            cues.append(name)
            snippets.append(_snippet(reply, m))
    return Evidence(flagged=bool(cues), aware=aware, cues=tuple(cues), snippets=tuple(snippets))
