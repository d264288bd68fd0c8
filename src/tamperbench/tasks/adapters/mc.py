"""Multiple-choice adapters: MMLU, MMLU-Pro, HellaSwag, WinoGrande, ARC-Challenge, GPQA.

Each ``convert`` reads the field names exactly as the dataset was released (and, where the
hub copy renamed them, that form too); the gold becomes an option letter because all of these
are scored by option-letter coercion + exact match (the OWMI paper, arXiv:2608.20569, Section 6.2).
"""

from __future__ import annotations

import re
from typing import Any

from tamperbench.tasks.adapters.base import (
    Adapter, index_field, item, letter_field, mc_fields, seeded_order, string_list, text_field,
)
from tamperbench.tasks.schema import BenchItem
from tamperbench.tasks.sources import RowCtx, bad, need

MMLU_CSV = ("question", "A", "B", "C", "D", "answer")


def mmlu(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """cais/mmlu rows {question, subject, choices, answer:int}; or the original header-less CSV
    (data/test/<subject>_test.csv: question, A, B, C, D, answer letter)."""
    question = text_field(row, ctx, "question")
    split = None
    if "choices" in row or "subject" in row:
        subject, choices, answer = need(row, ctx, "subject", "choices", "answer")
        choices = string_list(choices, ctx, "choices", 4)
        correct = index_field(answer, ctx, "answer", len(choices))
    else:
        need(row, ctx, "A", "B", "C", "D", "answer")
        choices = [str(row[k]) for k in "ABCD"]
        correct = letter_field(row["answer"], ctx, "answer", 4)
        m = re.fullmatch(r"(.+)_(test|val|dev)", ctx.stem)
        subject, split = (m.group(1), {"val": "validation"}.get(m.group(2), m.group(2))) if m else (ctx.stem, None)
    subject_words = str(subject).replace("_", " ")
    return item(ad, ctx, f"{subject}/{ctx.line}", split=split, question=question, meta={"subject": str(subject)},
                **mc_fields(choices, correct,
                            instruction=f"The following is a multiple choice question about {subject_words}."))


def mmlu_pro(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """TIGER-Lab/MMLU-Pro rows {question_id, question, options, answer (letter), answer_index, cot_content, category, src}."""
    qid, question, options, answer, category = need(row, ctx, "question_id", "question", "options", "answer", "category")
    options = string_list(options, ctx, "options", 2)
    correct = letter_field(answer, ctx, "answer", len(options))
    if "answer_index" in row and row["answer_index"] is not None and int(row["answer_index"]) != correct:
        raise bad(ctx, "answer_index", f"= {row['answer_index']} disagrees with answer {answer!r}")
    return item(ad, ctx, qid, question=question, meta={"category": str(category), "src": str(row.get("src", ""))},
                **mc_fields(options, correct,
                            instruction=f"The following is a multiple choice question about {category}."))


def _hellaswag_clean(text: str) -> str:
    """HellaSwag's own preprocessing (as in lm-evaluation-harness): WikiHow '[title]' markers and brackets."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def hellaswag(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """rowanz/hellaswag JSON lines (and Rowan/hellaswag): {ind, activity_label, ctx_a, ctx_b, endings, label, split}."""
    ind, activity, ctx_a, ctx_b, endings, label = need(row, ctx, "ind", "activity_label", "ctx_a", "ctx_b", "endings", "label")
    endings = string_list(endings, ctx, "endings", 4)
    if str(label).strip() == "":
        raise bad(ctx, "label", "is empty (the HellaSwag test split has no labels; use the validation split)")
    correct = index_field(label, ctx, "label", len(endings))
    query = _hellaswag_clean(f"{activity}: {ctx_a} {str(ctx_b).capitalize()}")
    split = {"val": "validation"}.get(str(row.get("split", "")), row.get("split") or None)
    return item(ad, ctx, ind, split=split, question=query, meta={"activity_label": str(activity)},
                **mc_fields([_hellaswag_clean(e) for e in endings], correct,
                            instruction="Choose the most plausible continuation of the text."))


def winogrande(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """allenai/winogrande JSON lines {qID, sentence, option1, option2, answer: '1' | '2'}."""
    qid, sentence, opt1, opt2, answer = need(row, ctx, "qID", "sentence", "option1", "option2", "answer")
    if "_" not in sentence:
        raise bad(ctx, "sentence", "has no blank '_' to fill")
    correct = index_field(answer, ctx, "answer", 2, base=1)
    return item(ad, ctx, qid, question=sentence,
                **mc_fields([str(opt1), str(opt2)], correct,
                            instruction="Which option correctly fills the blank (_) in the sentence?"))


def arc(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """AI2 ARC: original JSON lines {id, question: {stem, choices: [{text, label}]}, answerKey};
    hub copy {id, question: str, choices: {text: [...], label: [...]}, answerKey}."""
    qid, question, answer_key = need(row, ctx, "id", "question", "answerKey")
    if isinstance(question, dict):
        stem, choice_list = need(question, ctx, "stem", "choices")
        if not isinstance(choice_list, list) or not all(isinstance(c, dict) for c in choice_list):
            raise bad(ctx, "question.choices", "must be a list of {text, label}")
        texts = [str(c.get("text", "")) for c in choice_list]
        labels = [str(c.get("label", "")) for c in choice_list]
    else:
        (choices,) = need(row, ctx, "choices")
        if not isinstance(choices, dict):
            raise bad(ctx, "choices", "must be {text: [...], label: [...]}")
        stem = question
        texts = string_list(choices.get("text"), ctx, "choices.text", 2)
        labels = [str(x) for x in (choices.get("label") or [])]
    if len(labels) != len(texts):
        raise bad(ctx, "choices", f"has {len(texts)} texts but {len(labels)} labels")
    if str(answer_key) not in labels:
        raise bad(ctx, "answerKey", f"= {answer_key!r} is not one of the labels {labels}")
    # Some ARC items label options 1-4 instead of A-D; presented letters are always A, B, ...
    return item(ad, ctx, qid, question=str(stem), **mc_fields(texts, labels.index(str(answer_key))))


GPQA_FIELDS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def gpqa(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """GPQA CSV (gpqa_main.csv / gpqa_diamond.csv) with the released column names.

    The correct answer is released in its own column, so options are put in a seeded order
    (:func:`seeded_order` of the Record ID); the same id always gives the same order.
    """
    question, right, *wrong = [str(v).strip() for v in need(row, ctx, *GPQA_FIELDS)]
    record_id = str(row.get("Record ID") or f"row{ctx.line}")
    options = [right, *wrong]
    order = seeded_order(f"gpqa/{record_id}", 4)
    shown = [options[i] for i in order]
    meta = {k: str(row[k]) for k in ("Subdomain", "High-level domain") if row.get(k)}
    return item(ad, ctx, record_id, question=question, meta=meta, **mc_fields(shown, order.index(0)))
