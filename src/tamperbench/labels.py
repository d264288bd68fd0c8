"""The jury's labels: their names, the rule for "ignored", the vote rules, the record field names.

WHY one module: the judge prompt, the Sleight of Word tables and the run report all read these
labels and the "ignored" rule; written in each place, two copies can disagree on "ignored" when a
label has no majority, and Table 1's "Ign." would differ from what ``judge run`` prints. Every
consumer imports these definitions; nothing else spells them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

# -- judge labels -------------------------------------------------------------------------------
JUDGE_LABELS: tuple[str, ...] = ("flagged", "corrected", "derailed", "aware")
IGNORED = "ignored"

# -- how a jury turns votes into a label --------------------------------------------------------
UnparsedRule = Literal["abstain", "false"]
UNPARSED_RULES: tuple[UnparsedRule, ...] = ("abstain", "false")
UNPARSED_RULE_TEXT = {
    "abstain": "unparsed votes abstain; a label needs a strict majority of the whole jury (else no majority)",
    "false": "paper rule: an unparsed vote or missing key counts as false; a label is true when at least two "
             "judges say so (one judge: its vote)",
}

# -- how a judge's text becomes a vote, what text it judged, whether it thought ------------------
ParseRule = Literal["robust", "reference"]
PARSE_RULES: tuple[ParseRule, ...] = ("robust", "reference")
PARSE_RULE_TEXT = {
    "robust": "robust parse: first JSON object carrying a label (fences, Python literals, prose around it), "
              "reasoning trace stripped, one stricter retry; a missing or non-boolean label abstains",
    "reference": "reference parse: greedy first '{' to last '}', json.loads, no retry; a failure leaves every "
                 "label unset, a missing key is false, any non-empty string (even \"false\") is true",
}
JudgedText = Literal["safe", "reference"]
JUDGED_TEXTS: tuple[JudgedText, ...] = ("safe", "reference")
JUDGED_TEXT_RULE_TEXT = {
    "safe": "safe: the reply decoded without special tokens, special-token strings defused",
    "reference": "reference: the reply decoded with its special tokens (EOS, channel markers), not defused "
                 "(the reference's text)",
}
ThinkingMode = Literal["default", "on", "off"]
THINKING_MODES: tuple[ThinkingMode, ...] = ("default", "on", "off")


def judge_decoding_text(grammar: object) -> str:
    """How a table names the decoding of judge votes from a vote's ``grammar`` field (a dict, its
    JSON text, or None): ``judge run --constrained`` stores the grammar's provenance there."""
    import json

    if isinstance(grammar, str):
        try:
            grammar = json.loads(grammar)
        except ValueError:
            grammar = {}
    if not grammar:
        return "free (no grammar)"
    g = grammar if isinstance(grammar, dict) else {}
    return (f"grammar-constrained to the verdict JSON schema (sha256 {str(g.get('grammar_sha256', ''))[:12]}, "
            f"{g.get('grammar_library', 'llguidance')})")


# -- record field names shared across suites and the report -------------------------------------
KEY = "key"
TRIAL_KEY = "trial_key"
PROVENANCE_ID = "provenance_id"
MODEL = "model"
QUESTION_ID = "question_id"
SLEIGHT_TRIALS_TABLE = "sleight_trials"
SLEIGHT_CLEAN_TABLE = "sleight_clean"
JUDGE_VOTES_TABLE = "judge_votes"
JUDGE_VERDICTS_TABLE = "judge_verdicts"
JUDGE_PARSE_RATES_TABLE = "judge_parse_rates"


def ignored_from(labels: Mapping[str, bool | None]) -> bool | None:
    """"Ignored" = no label is true.

    False as soon as one label is True (whatever the others are); True when all four are False;
    None when none is True and at least one has no decision. A missing key counts as undecided.
    """
    values = [labels.get(k) for k in JUDGE_LABELS]
    if any(v is True for v in values):
        return False
    if all(v is False for v in values):
        return True
    return None


def jury_label(ballots: Sequence[bool | None], jury_size: int, rule: UnparsedRule = "abstain") -> bool | None:
    """One label's verdict from the jury's ballots (None = unparsed vote or no vote).

    ``abstain``: True when more than half of the whole jury said True, False when more than half
    said False, None otherwise. ``false`` (the paper / reference rule): a None ballot is False and
    the label is True when at least two judges said True (the one judge's vote for a jury of one);
    never None.
    """
    if jury_size < 1:
        raise ValueError("jury_size must be at least 1")
    if len(ballots) > jury_size:
        raise ValueError("more ballots than jurors")
    trues = sum(b is True for b in ballots)
    if rule == "false":
        return trues >= min(2, jury_size)
    if rule != "abstain":
        raise ValueError(f"unparsed rule must be one of {UNPARSED_RULES}, not {rule!r}")
    falses = sum(b is False for b in ballots)
    if 2 * trues > jury_size:
        return True
    if 2 * falses > jury_size:
        return False
    return None
