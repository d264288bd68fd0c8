"""Code and instruction-following adapters: HumanEval, MBPP, IFEval."""

from __future__ import annotations

from typing import Any

from tamperbench.tasks.adapters.base import Adapter, item, text_field
from tamperbench.tasks.schema import BenchItem, CodeTests, IFEvalSpec
from tamperbench.tasks.sources import RowCtx, bad, need

MBPP_INSTRUCTION = "You are an expert Python programmer, and here is your task:"


def humaneval(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """openai/human-eval JSON lines {task_id, prompt, canonical_solution, test, entry_point}."""
    task_id, prompt, solution, test, entry = need(row, ctx, "task_id", "prompt", "canonical_solution", "test", "entry_point")
    if "def check(" not in test:
        raise bad(ctx, "test", "has no 'def check(candidate)'")
    return item(ad, ctx, task_id, question=prompt,
                instruction="Complete the following Python function. Reply with the code only.",
                tests=CodeTests(test=test, entry_point=str(entry), prefix_prompt=True, reference=solution))


def mbpp(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """MBPP: original mbpp.jsonl / hub 'full' {task_id, text, code, test_list, test_setup_code, challenge_test_list};
    hub 'sanitized' {task_id, prompt, code, test_imports, test_list}."""
    (task_id,) = need(row, ctx, "task_id")
    text = row.get("text") if "text" in row else row.get("prompt")
    if not isinstance(text, str):
        raise bad(ctx, "text", "is missing (MBPP rows have 'text', sanitized rows 'prompt')")
    code = text_field(row, ctx, "code")
    (tests,) = need(row, ctx, "test_list")
    tests = tests.tolist() if hasattr(tests, "tolist") else tests
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise bad(ctx, "test_list", "must be a non-empty list of assert statements")
    imports = row.get("test_imports")
    imports = imports.tolist() if hasattr(imports, "tolist") else (imports or [])
    setup = "\n".join([str(row.get("test_setup_code") or ""), *map(str, imports)]).strip("\n")
    task_id = int(task_id)
    # MBPP's own split by task id: 1-10 prompt, 11-510 test, 511-600 validation, 601-974 train.
    split = "prompt" if task_id <= 10 else "test" if task_id <= 510 else "validation" if task_id <= 600 else "train"
    question = f"{text}\nYour code should pass these tests:\n\n" + "\n".join(tests)
    return item(ad, ctx, task_id, split=split, question=question, instruction=MBPP_INSTRUCTION,
                tests=CodeTests(test="\n".join(tests), setup=setup, reference=code))


def ifeval(row: dict[str, Any], ctx: RowCtx, ad: Adapter) -> BenchItem:
    """google/IFEval input_data.jsonl {key, prompt, instruction_id_list, kwargs}."""
    key, prompt, ids, kwargs = need(row, ctx, "key", "prompt", "instruction_id_list", "kwargs")
    ids = ids.tolist() if hasattr(ids, "tolist") else ids
    kwargs = kwargs.tolist() if hasattr(kwargs, "tolist") else kwargs
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise bad(ctx, "instruction_id_list", "must be a non-empty list of instruction ids")
    if not isinstance(kwargs, list) or len(kwargs) != len(ids) or not all(isinstance(k, dict) for k in kwargs):
        raise bad(ctx, "kwargs", f"must be a list of {len(ids)} objects, one per instruction")
    from tamperbench.tasks.scoring.ifeval import unknown_instructions

    unknown = unknown_instructions(ids)
    if unknown:
        raise bad(ctx, "instruction_id_list", f"has unknown instruction ids: {', '.join(unknown)}")
    # Parquet fills absent keys with None; the checkers take only the keys that are set.
    clean = tuple({k: v for k, v in kw.items() if v is not None} for kw in kwargs)
    return item(ad, ctx, key, question=text_field(row, ctx, "prompt"),
                ifeval=IFEvalSpec(instruction_id_list=tuple(ids), kwargs=clean))
