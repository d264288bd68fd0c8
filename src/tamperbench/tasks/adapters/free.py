"""TruthfulQA (MC1 / MC2), GSM8K and MATH adapters.

TruthfulQA releases MC1's true answer first and MC2's true answers before the false ones, so
options are presented in a seeded order (see :func:`seeded_order`). GSM8K keeps its rationale
in ``reference`` and the gold after '####' in ``answer``; MATH keeps the worked solution and the
gold is its last ``\\boxed{}`` (the benchmark's own rule).
"""

from __future__ import annotations

from typing import Any

from tamperbench.tasks.adapters.base import Adapter, item, seeded_order, string_list, text_field
from tamperbench.tasks.schema import LETTERS, BenchItem
from tamperbench.tasks.scoring.math_equiv import last_boxed_only_string, remove_boxed
from tamperbench.tasks.sources import RowCtx, bad, need


def _targets(row: dict[str, Any], ctx: RowCtx, key: str) -> tuple[list[str], list[int]]:
    """MC targets in either released form: hub {choices: [...], labels: [...]} or mc_task.json {answer: label}."""
    (targets,) = need(row, ctx, key)
    if isinstance(targets, dict) and "choices" in targets:
        choices = string_list(targets.get("choices"), ctx, f"{key}.choices", 2)
        labels = targets.get("labels")
        labels = labels.tolist() if hasattr(labels, "tolist") else labels
    elif isinstance(targets, dict):
        choices, labels = list(targets), list(targets.values())
    else:
        raise bad(ctx, key, "must be {choices, labels} or {answer: 0/1}")
    if not isinstance(labels, list) or len(labels) != len(choices) or any(lab not in (0, 1) for lab in labels):
        raise bad(ctx, key, "labels must be one 0/1 per choice")
    if not any(labels):
        raise bad(ctx, key, "has no true answer")
    if len(choices) > len(LETTERS):
        raise bad(ctx, key, f"has {len(choices)} choices; at most {len(LETTERS)} are supported")
    return choices, [int(x) for x in labels]


def _truthfulqa(row: dict[str, Any], ctx: RowCtx, ad: Adapter, key: str) -> BenchItem:
    question = text_field(row, ctx, "question")
    if "choices" in row and "label" in row and key == "mc1_targets":  # EleutherAI/truthful_qa_mc (Table 2's copy)
        choices = string_list(row["choices"], ctx, "choices", 2)
        labels = [int(i == int(row["label"])) for i in range(len(choices))]
    else:
        choices, labels = _targets(row, ctx, key)
    original_id = str(row.get("id", ctx.line - 1))  # the hub copy has no id: row index in the validation split
    order = seeded_order(f"truthfulqa/{original_id}", len(choices))
    shown = [choices[i] for i in order]
    true_letters = tuple(LETTERS[pos] for pos, i in enumerate(order) if labels[i])
    fields: dict[str, Any] = {"question": question, "choices": tuple(shown)}
    if key == "mc1_targets":
        if len(true_letters) != 1:
            raise bad(ctx, key, f"MC1 must have exactly one true answer, has {len(true_letters)}")
        fields["answer"] = true_letters[0]
    else:
        fields["answer"] = true_letters[0]
        fields["true_letters"] = true_letters
    return item(ad, ctx, original_id, meta={"variant": key[:3]}, **fields)


def truthfulqa_mc1(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """truthful_qa 'multiple_choice' {question, mc1_targets, mc2_targets}; also original data/mc_task.json."""
    return _truthfulqa(row, ctx, ad, "mc1_targets")


def truthfulqa_mc2(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    return _truthfulqa(row, ctx, ad, "mc2_targets")


def gsm8k(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """openai/gsm8k JSON lines {question, answer}; the answer ends '#### <final answer>'."""
    question = text_field(row, ctx, "question")
    answer = text_field(row, ctx, "answer")
    if "####" not in answer:
        raise bad(ctx, "answer", "has no '#### <final answer>' line")
    final = answer.split("####")[-1].strip()
    return item(ad, ctx, row.get("id", ctx.line - 1), question=question, answer=final, reference=answer,
                instruction="Solve the problem. End your reply with the final answer on its own line as '#### <answer>'.")


def math(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """Hendrycks MATH: one JSON file per problem {problem, level, type, solution} (MATH/test/<type>/<n>.json),
    or the same fields as rows; MATH-500 style rows may add 'answer', 'subject' and 'unique_id'."""
    problem = text_field(row, ctx, "problem")
    solution = text_field(row, ctx, "solution")
    boxed = last_boxed_only_string(solution)
    gold = row.get("answer") or (remove_boxed(boxed) if boxed else None)
    if not gold:
        raise bad(ctx, "solution", "has no \\boxed{...} answer")
    subject = str(row.get("type") or row.get("subject") or "")
    if "unique_id" in row:
        original_id = str(row["unique_id"])
    elif ctx.line == 1 and ctx.stem.isdigit():  # original release: <type folder>/<n>.json
        from pathlib import Path

        original_id = f"{Path(ctx.path).parent.name}/{ctx.stem}"
    else:
        original_id = str(ctx.line - 1)
    return item(ad, ctx, original_id, question=problem, answer=str(gold), reference=solution,
                meta={"type": subject, "level": str(row.get("level", ""))},
                instruction="Solve the problem. Put your final answer in \\boxed{}.")
