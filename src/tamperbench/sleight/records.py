"""Stored records of a Sleight of Word run: one clean answer per (model, question), one row per trial.

Why two tables: a substituted run is identical to the clean run up to its first swap (greedy decoding
from the same prompt), so a trial stores its per-token arrays only from ``fork_at`` (the first swap)
on; the shared prefix lives once in ``sleight_clean``. An untouched trial (no swap) stores no arrays
at all: its reaction *is* the clean answer. ``full_trace`` reassembles a trial's whole answer.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from tamperbench.reasoning import has_reasoning
from tamperbench.store import Record, trial_key

CLEAN_TABLE = "sleight_clean"
TRIALS_TABLE = "sleight_trials"

_THINK = re.compile(r"<think>|</think>|<thinking>|<\|channel\|>analysis|<\|begin_of_thought\|>", re.I)


class SleightClean(Record):
    """The untampered greedy answer to one question, with its per-token values."""

    model: str
    question_id: str
    question: str
    prompt_text: str
    prompt_ids: list[int]
    max_new_tokens: int
    token_ids: list[int]
    text: str
    surprisal: list[float]  # -ln p(emitted token)
    entropy_full: list[float]  # full-vocabulary entropy of each step's distribution (nats)
    entropy_top20: list[float]  # entropy of the top-k candidates, renormalised (the paper's estimate)
    topk_ids: list[list[int]] | None = None
    topk_logprobs: list[list[float]] | None = None
    whole_word_occurrences: int  # trigger occurrences, whole word, in the clean text
    finish_reason: str
    thinking: bool
    decode_seconds: float
    # the engine's slots when this was decoded, and what set them (models/memory.py BatchChoice.by:
    # memory / batch_size / work); None in runs written before they were recorded
    batch_rows: int | None = None
    batch_by: str | None = None


class SleightTrial(Record):
    """One (question, substitution) trial. Arrays start at ``fork_at``; the prefix is the clean answer's."""

    model: str
    question_id: str
    question: str
    prompt_text: str
    trigger: str  # trigger words joined by ","
    substitution: str
    entity: bool  # the substitution is the entity phrase ("Mandela effect")
    clean_key: str
    reaction_text: str  # the whole reply, decoded without special tokens (judges read this by default)
    fork_at: int  # index of the first swapped token; == n_tokens when untouched
    n_tokens: int  # length of the whole reply, injected tokens included
    token_ids: list[int]  # reply tokens from fork_at on
    surprisal: list[float]  # from fork_at on (injected tokens too: the model's view of the forced token)
    entropy_full: list[float]
    entropy_top20: list[float]
    topk_ids: list[list[int]] | None = None
    topk_logprobs: list[list[float]] | None = None
    injected: list[int]  # absolute indices (in the whole reply) of forced replacement tokens
    swap_positions: list[int]  # absolute index of each swap's first injected token
    swap_injected: list[int]  # tokens injected per swap
    matched_surprisal: list[list[float]]  # per swap: the unaltered branch's next `window` tokens
    matched_entropy_full: list[list[float]]
    matched_entropy_top20: list[list[float]]
    swap_count: int
    mentions: int
    spaceless: int
    occurrences: int  # whole-word occurrences in the final text, replaced ones and mentions included
    coverage: float  # swap_count / occurrences (0 when there was nothing to replace)
    untouched: bool
    thinking: bool
    finish_reason: str
    decode_seconds: float
    batch_rows: int | None = None  # as in SleightClean
    batch_by: str | None = None
    # the reply decoded WITH its special tokens (EOS, channel markers): the text the reference's judges read
    # (``judge run --judged-text reference``); None in runs stored before it was recorded
    reaction_text_special: str | None = None


def clean_spec(provenance_id: str, question_id: str, question: str, spec: Any) -> dict:
    """The canonical identity of a clean answer (independent of trigger and substitution)."""
    return {
        "suite": "sleight",
        "table": CLEAN_TABLE,
        "provenance_id": provenance_id,
        "question_id": question_id,
        "question": question,
        "max_new_tokens": spec.max_new_tokens,
        "decoding": decoding_settings(spec),
    }


def trial_spec(provenance_id: str, question_id: str, question: str, substitution: str, spec: Any) -> dict:
    """The canonical identity of a trial; its hash is the record key used for resume."""
    return {
        **clean_spec(provenance_id, question_id, question, spec),
        "table": TRIALS_TABLE,
        "triggers": list(spec.triggers),
        "substitution": substitution,
        # only when not the default, so runs written before the option existed keep their keys
        **({"detector_rules": spec.detector_rules}
           if getattr(spec, "detector_rules", "reference") != "reference" else {}),
        **({"replacement_case": spec.replacement_case} if getattr(spec, "replacement_case", None) is not None else {}),
    }


def decoding_settings(spec: Any) -> dict:
    return {"mode": spec.decoding, "window": spec.window, "topk": spec.topk, "keep_topk": spec.keep_topk,
            "seed": spec.seed, "batch_size": spec.batch_size, "dtype": spec.dtype}


def clean_key(provenance_id: str, question_id: str, question: str, spec: Any) -> str:
    return trial_key(clean_spec(provenance_id, question_id, question, spec))


def trial_record_key(provenance_id: str, question_id: str, question: str, substitution: str, spec: Any) -> str:
    return trial_key(trial_spec(provenance_id, question_id, question, substitution, spec))


def has_thinking(text: str) -> bool:
    """Whether a reasoning trace appears (``<think>``, gpt-oss's analysis channel, its glued form, ...).

    Recorded, not stripped: Sleight of Word swaps and judges the whole reply, trace included, as the
    reference implementation does.
    """
    return bool(_THINK.search(text)) or has_reasoning(text)


def _word_re(triggers: tuple[str, ...] | list[str]) -> re.Pattern:
    alts = "|".join(re.escape(t) for t in triggers)
    return re.compile(rf"(?<!\w)(?:{alts})(?!\w)", re.IGNORECASE)


def count_whole_words(text: str, triggers) -> int:
    return len(_word_re(tuple(triggers)).findall(text))


def replacement_coverage(text: str, triggers, substitution: str, swap_count: int, spaceless: int) -> tuple[int, float]:
    """(occurrences, coverage) for a final reply.

    Occurrences = swaps made + trigger words still standing as whole words in the final text
    (mentions and anything the detector let through) + space-less occurrences the detector saw.
    Trigger words spelled by the substitution itself are not counted as standing occurrences.
    """
    standing = count_whole_words(text, triggers) - swap_count * count_whole_words(substitution, triggers)
    occurrences = swap_count + max(standing, 0) + spaceless
    return occurrences, (swap_count / occurrences if occurrences else 0.0)


class FullTrace(BaseModel):
    """A trial's whole reply with per-token values (the clean prefix filled in)."""

    token_ids: list[int]
    surprisal: list[float]
    entropy_full: list[float]
    entropy_top20: list[float]
    injected: list[bool]


def full_trace(clean: dict, trial: dict) -> FullTrace:
    """Reassemble a trial's whole reply from its clean row and its own row (dicts from the store)."""
    k = trial["fork_at"]
    if trial["untouched"]:
        ids, s, ef, et = clean["token_ids"], clean["surprisal"], clean["entropy_full"], clean["entropy_top20"]
    else:
        ids = clean["token_ids"][:k] + trial["token_ids"]
        s = clean["surprisal"][:k] + trial["surprisal"]
        ef = clean["entropy_full"][:k] + trial["entropy_full"]
        et = clean["entropy_top20"][:k] + trial["entropy_top20"]
    inj = set(trial["injected"])
    return FullTrace(token_ids=list(ids), surprisal=list(s), entropy_full=list(ef), entropy_top20=list(et),
                     injected=[i in inj for i in range(len(ids))])
