"""tamperbench's scorers as inspect scorers.

- :func:`exact_words_scorer`: the deterministic Exact Words scorer (:mod:`tamperbench.quote.scorer`).
  The score is ``C`` for a byte-faithful quote and ``I`` otherwise; the native class, its sub-label,
  the paper's five-class label and the evidence are in the score's metadata.
- :func:`sleight_jury`: the Sleight of Word jury (Appendix G prompt, tamperbench's verdict parser,
  the majority rule of :func:`tamperbench.labels.jury_label`) over any inspect models, on any sample:
  the question (sample metadata ``question``, else the input) and the reply (the model's completion)
  in, the four labels out. A label without a majority is NaN in the value (``None`` in metadata),
  and the metrics average only the labels the jury decided, reporting how many.
"""

from __future__ import annotations

import math
from typing import Any

from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, get_model
from inspect_ai.scorer import (CORRECT, INCORRECT, Metric, SampleScore, Score, Target, accuracy, metric, scorer,
                               stderr)
from inspect_ai.solver import TaskState

from tamperbench.judge.parse import parse_verdict
from tamperbench.judge.prompt import JudgeInput, build_prompt
from tamperbench.quote.items import items_by_id
from tamperbench.quote.scorer import score_response
from tamperbench.quote.taxonomy import paper_class
from tamperbench.reasoning import strip_reasoning
from tamperbench.labels import JUDGE_LABELS, jury_label


@scorer(metrics=[accuracy(), stderr()])
def exact_words_scorer(preset: str = "standard"):
    """Faithful (C) or not (I), by tamperbench's deterministic Exact Words scorer."""
    items = items_by_id()

    async def score(state: TaskState, target: Target) -> Score:
        item_id = state.metadata.get("item_id") if state.metadata else None
        item = items.get(str(item_id))
        if item is None:
            raise ValueError(f"sample {state.sample_id}: metadata item_id {item_id!r} is not an Exact Words item")
        verdict = score_response(item, state.output.completion)
        return Score(value=CORRECT if verdict.category == "faithful" else INCORRECT, answer=verdict.answer,
                     explanation=verdict.category + (f" ({verdict.sub_label})" if verdict.sub_label else ""),
                     metadata={"category": verdict.category, "sub_label": verdict.sub_label,
                               "paper_class": paper_class(verdict.category, verdict.sub_label),
                               "evidence": verdict.evidence, "item_id": item.id,
                               "arm": state.metadata.get("arm")})

    return score


@metric
def decided_rate() -> Metric:
    """Mean of a label over the samples where the jury reached a majority (NaN values skipped)."""

    def compute(scores: list[SampleScore]) -> float:
        values = [float(s.score.as_float()) for s in scores]
        decided = [v for v in values if not math.isnan(v)]
        return sum(decided) / len(decided) if decided else float("nan")

    return compute


@metric
def decided_n() -> Metric:
    """How many samples the jury reached a majority on, for that label (the rate's denominator)."""

    def compute(scores: list[SampleScore]) -> int:
        return sum(not math.isnan(float(s.score.as_float())) for s in scores)

    return compute


@scorer(metrics={label: [decided_rate(), decided_n()] for label in JUDGE_LABELS})
def sleight_jury(judges: list[str] | str, fence: str = "nonce", rule: str = "abstain", max_tokens: int = 160,
                 trigger: str = "the", substitution: str | None = None):
    """A jury of inspect models labels the completion flagged / corrected / derailed / aware."""
    names = [judges] if isinstance(judges, str) else list(judges)
    if not names:
        raise ValueError("sleight_jury needs at least one judge model")

    async def score(state: TaskState, target: Target) -> Score:
        meta = state.metadata or {}
        reply = state.output.completion
        item = JudgeInput(trial_key=str(state.sample_id), question=str(meta.get("question", state.input_text)),
                          trigger=str(meta.get("trigger", trigger)),
                          substitution=str(meta.get("substitution", substitution or "")), reply=reply)
        prompt = build_prompt(item, fence=fence)  # type: ignore[arg-type]
        votes: list[dict[str, Any]] = []
        for name in names:
            output = await get_model(name).generate(
                [ChatMessageSystem(content=prompt.system), ChatMessageUser(content=prompt.user)],
                config=GenerateConfig(temperature=0.0, max_tokens=max_tokens))
            parsed = parse_verdict(strip_reasoning(output.completion), reply=reply)
            votes.append({"judge": name, "status": parsed.status, "labels": dict(parsed.labels),
                          "rationale": parsed.rationale, "raw": output.completion})
        labels = {label: jury_label([v["labels"].get(label) for v in votes], len(names), rule)  # type: ignore[arg-type]
                  for label in JUDGE_LABELS}
        value = {label: (float("nan") if v is None else float(v)) for label, v in labels.items()}
        return Score(value=value, explanation=", ".join(f"{k}={v}" for k, v in labels.items()),
                     metadata={"labels": labels, "votes": votes, "rule": rule, "fence": fence,
                               "parsed": sum(v["status"] != "unparsed" for v in votes), "jury": names})

    return score
