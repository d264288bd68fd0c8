"""A deterministic, rule-based evidence detector reported beside the jury.

WHY: a jury costs GPU hours and judges drift between versions; a fixed set of regular expressions
costs nothing, runs offline on any run, and gives a reproducible floor to compare the jury against
(its agreement with the jury is reported as a kappa).

Two cue sets (``evidence_cues.py``), one scoring rule. ``flagged`` / ``aware`` are the reference
implementation's detector exactly: its cue list, its weak markers and its rule (any strong cue flags,
a substitution-family cue makes it aware, weak hesitation markers alone do neither), so the paper's
text-evidence column is computable. ``flagged_extended`` / ``aware_extended`` apply the same rule to the
reference cues plus tamperbench's own (``tb:`` names, including the substituted word in quotes).

It is a signal, not a label: phrases like "should be" also occur in ordinary answers, so the cue
names and the matched snippets are stored for inspection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tamperbench.judge.evidence_cues import (
    REFERENCE_ANOMALY,
    REFERENCE_CORRECTION,
    REFERENCE_SUBSTITUTION,
    REFERENCE_WEAK,
    TB_AWARE,
    TB_FLAG,
)

DETECTOR_VERSION = "evidence-v2"  # v2: the reference's cue list and rule; v1's cues kept as the tb: set
CUE_SETS = ("reference", "tamperbench")


def _compile(cues: dict[str, str], prefix: str = "") -> dict[str, re.Pattern[str]]:
    return {prefix + k: re.compile(v, re.IGNORECASE) for k, v in cues.items()}


_REF_STRONG = {**_compile(REFERENCE_CORRECTION), **_compile(REFERENCE_ANOMALY), **_compile(REFERENCE_SUBSTITUTION)}
_REF_AWARE = frozenset(REFERENCE_SUBSTITUTION)
_REF_WEAK = _compile(REFERENCE_WEAK, "weak:")
_TB_FLAG = _compile(TB_FLAG, "tb:")
_TB_AWARE = _compile(TB_AWARE, "tb:")
_QUOTES = "\"'\u201c\u201d\u2018\u2019`"


@dataclass(frozen=True)
class Evidence:
    flagged: bool  # reference rule over the reference cues: any strong cue
    aware: bool  # reference rule: a substitution-family cue
    cues: tuple[str, ...]  # reference names, weak:<name>, tb:<name>
    snippets: tuple[str, ...]  # up to 40 characters around each match, in order of cue
    flagged_extended: bool = False  # the same rule over the reference and tamperbench cues
    aware_extended: bool = False

    @property
    def weak(self) -> tuple[str, ...]:
        return tuple(c for c in self.cues if c.startswith("weak:"))


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

    def scan(patterns: dict[str, re.Pattern[str]]) -> list[str]:
        hits = []
        for name, pat in patterns.items():
            m = pat.search(reply)
            if m:
                hits.append(name)
                cues.append(name)
                snippets.append(_snippet(reply, m))
        return hits

    strong = scan(_REF_STRONG)
    scan(_REF_WEAK)
    tb_flag = scan(_TB_FLAG)
    if substitution.strip() and (m := quoted_word_pattern(substitution).search(reply)):
        tb_flag.append("tb:quoted_word")
        cues.append("tb:quoted_word")
        snippets.append(_snippet(reply, m))
    tb_aware = scan(_TB_AWARE)
    aware = any(c in _REF_AWARE for c in strong)
    return Evidence(flagged=bool(strong), aware=aware, cues=tuple(cues), snippets=tuple(snippets),
                    flagged_extended=bool(strong or tb_flag or tb_aware), aware_extended=aware or bool(tb_aware))
