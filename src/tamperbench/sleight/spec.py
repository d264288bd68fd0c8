"""The Sleight of Word run spec: a preset plus options, resolved into a frozen :class:`SleightSpec`.

Why a spec object: the run directory stores it (``spec.json``) and refuses to resume under a
different one, so every number in a run comes from exactly one set of questions, words, trigger
words, budget and decoding settings. The questions, words and presets are in :mod:`sleight.protocol`.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field

from tamperbench import spec_base as specs
from tamperbench.errors import UserError
from tamperbench.sleight.protocol import TOPK, WINDOW, entity_phrase, get_preset, protocol_questions, protocol_words
from tamperbench.spec_base import BatchSize, FrozenSpec, NewTokens, Seed

__all__ = ["SleightSpec", "build_spec"]


def _one_word(word: str) -> str:
    if not word or len(word.split()) != 1 or word != word.strip():
        raise ValueError("trigger words are single non-empty words")
    return word


class SleightSpec(FrozenSpec):
    """Everything that decides a Sleight of Word run's numbers. Frozen; stored as spec.json.

    The constraints live on the fields, so a spec from flags and one from a file are checked by the
    same rules, before any run directory exists.
    """

    cli_flags: ClassVar[dict[str, str]] = {"questions": "--questions", "substitutions": "--words",
                                           "triggers": "--trigger",
                                           "detector_rules": "--detector-rules",
                                           "replacement_case": "--replacement-case"}

    suite: Literal["sleight"] = "sleight"
    model: str = Field(min_length=1)
    preset: str
    questions: tuple[tuple[str, str], ...] = Field(min_length=1)  # (id, text)
    substitutions: tuple[Annotated[str, Field(min_length=1)], ...] = Field(min_length=1)
    triggers: tuple[Annotated[str, AfterValidator(_one_word)], ...] = Field(min_length=1)
    max_new_tokens: NewTokens
    decoding: Literal["greedy"] = "greedy"
    window: int = Field(default=WINDOW, ge=1, le=10_000)
    topk: int = Field(default=TOPK, ge=1, le=10_000)
    keep_topk: bool = False
    seed: Seed = 0
    device: str = "auto"
    dtype: str | None = None
    batch_size: BatchSize | None = None
    chat_template: str | None = None  # None: the model's own; "none": raw prompt; else a Jinja file
    # which occurrences count as the trigger (sleight/detector.py): the reference code's rules, which
    # produced the paper's numbers, or tamperbench v1's reading of Appendix C
    detector_rules: Literal["reference", "appendix-c"] = "reference"
    # the replacement's case (sleight/detector.py): None follows the rules (first-letter under reference, as the
    # reference's encode_replacement; pattern under appendix-c), or set: first-letter | pattern (THE -> SCARF)
    replacement_case: Literal["first-letter", "pattern"] | None = None


def _extend(chosen: list, pool: list, n: int | None, what: str) -> list:
    """First n of ``chosen``; beyond it, continue with ``pool`` items not yet chosen (protocol order)."""
    if n is None:
        return chosen
    if n < 1:
        raise UserError(f"--{what}: the {what} list would be empty (got {n}); give at least 1")
    out = chosen[:n]
    for item in pool:
        if len(out) >= n:
            break
        if item not in out:
            out.append(item)
    if len(out) < n:
        raise UserError(f"--{what}: only {len(out)} {what} exist in the protocol, asked for {n}")
    return out


def build_spec(
    *,
    model: str,
    preset: str = "quick",
    questions: int | None = None,
    words: int | None = None,
    triggers: list[str] | None = None,
    max_new_tokens: int | None = None,
    keep_topk: bool = False,
    seed: int = 0,
    device: str = "auto",
    dtype: str | None = None,
    batch_size: int | None = None,
    chat_template: str | None = None,
    detector_rules: str = "reference",
    replacement_case: str | None = None,
) -> SleightSpec:
    """Resolve a preset plus CLI overrides into a spec, rejecting anything that cannot run."""
    p = get_preset(preset)
    by_id = dict(protocol_questions())
    qids = _extend(list(p.question_ids), list(by_id), questions, "questions")
    subs = _extend(list(p.substitutions), [entity_phrase(), *protocol_words()], words, "words")
    budget = p.max_new_tokens if max_new_tokens is None else max_new_tokens
    trig = [t.strip() for t in (triggers or ["the"])]
    return specs.build_spec(
        SleightSpec,
        model=model,
        preset=p.name,
        questions=tuple((i, by_id[i]) for i in qids),
        substitutions=tuple(subs),
        triggers=tuple(dict.fromkeys(t.lower() for t in trig)),
        max_new_tokens=budget,
        keep_topk=keep_topk,
        seed=seed,
        device=device,
        dtype=dtype,
        batch_size=batch_size,
        chat_template=chat_template,
        detector_rules=detector_rules,
        replacement_case=replacement_case,
    )
