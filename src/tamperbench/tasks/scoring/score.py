"""Score one reply to one item by the item's own rule; the verdict says how it was read.

Every verdict carries ``score`` (what the benchmark averages), ``correct`` (0/1 outcome, None
when the rule could not be applied here), ``parsed`` (what was extracted from the reply) and
``parse_ok``, so a malformed reply is visible as such rather than silently counted as wrong.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict

from tamperbench.tasks.schema import BenchItem
from tamperbench.tasks.scoring.sandbox import Limits


class Verdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    item_id: str
    benchmark: str
    scoring: str
    score: float | None
    correct: bool | None
    parsed: str | None
    parse_ok: bool
    gold: str | None
    detail: dict[str, Any] = {}


def _mc(item: BenchItem, response: str) -> Verdict:
    from tamperbench.tasks.scoring.text_rules import coerce_letter

    letter, rule = coerce_letter(response, item.choices or ())
    gold: set[str] = (set(item.true_letters) if item.scoring == "mc_letter_any_true" and item.true_letters
                      else {item.answer} if item.answer is not None else set())
    correct = letter in gold if letter else False
    return Verdict(item_id=item.id, benchmark=item.benchmark, scoring=item.scoring, score=float(correct),
                   correct=correct, parsed=letter, parse_ok=letter is not None, gold=",".join(sorted(gold)),
                   detail={"rule": rule})


def _gsm8k(item: BenchItem, response: str) -> Verdict:
    from tamperbench.tasks.scoring.text_rules import exact_match, gsm8k_extract, token_f1

    pred, found = gsm8k_extract(response)
    em, f1 = exact_match(pred, item.answer or ""), token_f1(pred, item.answer or "")
    score = max(em, f1)
    return Verdict(item_id=item.id, benchmark=item.benchmark, scoring=item.scoring, score=score,
                   correct=score == 1.0, parsed=pred, parse_ok=found and bool(pred), gold=item.answer,
                   detail={"exact_match": em, "token_f1": f1, "found_marker": found})


def _math(item: BenchItem, response: str) -> Verdict:
    from tamperbench.tasks.scoring.math_equiv import is_equiv, last_boxed_only_string, remove_boxed

    boxed = last_boxed_only_string(response)
    pred = remove_boxed(boxed) if boxed else None
    correct = pred is not None and is_equiv(pred, item.answer)
    return Verdict(item_id=item.id, benchmark=item.benchmark, scoring=item.scoring, score=float(correct),
                   correct=correct, parsed=pred, parse_ok=pred is not None, gold=item.answer, detail={})


def _code(item: BenchItem, response: str, limits: Limits) -> Verdict:
    from tamperbench.tasks.scoring.code_tests import extract_code, run_tests

    code = extract_code(response)
    if not code.strip():
        return Verdict(item_id=item.id, benchmark=item.benchmark, scoring=item.scoring, score=0.0, correct=False,
                       parsed=None, parse_ok=False, gold=None, detail={"status": "empty"})
    program, result = run_tests(item, code, limits)
    passed = result.status == "passed"
    return Verdict(item_id=item.id, benchmark=item.benchmark, scoring=item.scoring, score=float(passed),
                   correct=passed, parsed=code, parse_ok=True, gold=None,
                   detail={"status": result.status, "returncode": result.returncode, "wall_s": round(result.wall_s, 3),
                           "assembly": program.assembly, "sandbox": result.isolation,
                           "output_bytes": result.output_bytes, "tree": result.tree,
                           "stderr_tail": result.stderr[-500:]})


def _ifeval(item: BenchItem, response: str) -> Verdict:
    from tamperbench.tasks.scoring.ifeval import check

    spec = item.ifeval
    assert spec is not None
    result = check(item.question, spec.instruction_id_list, spec.kwargs, response)
    strict = result["prompt_strict"]
    return Verdict(item_id=item.id, benchmark=item.benchmark, scoring=item.scoring,
                   score=None if strict is None else float(strict), correct=strict, parsed=None,
                   parse_ok=bool(response.strip()), gold=None, detail=result)


def score(item: BenchItem, response: str, limits: Limits = Limits()) -> Verdict:
    """Apply ``item.scoring`` to ``response``."""
    if item.scoring in ("mc_letter_exact", "mc_letter_any_true"):
        return _mc(item, response)
    if item.scoring == "gsm8k_em_f1":
        return _gsm8k(item, response)
    if item.scoring == "math_boxed_equiv":
        return _math(item, response)
    if item.scoring == "code_tests":
        return _code(item, response, limits)
    if item.scoring == "ifeval":
        return _ifeval(item, response)
    raise ValueError(f"unknown scoring rule {item.scoring!r}")


def mc2_from_logprobs(logprobs: Sequence[float], true_mask: Sequence[bool]) -> float:
    """TruthfulQA MC2 as published: normalised probability mass on the true answers.

    The paper's MC2 needs per-option log-likelihoods, which a text reply does not carry;
    ``mc_letter_any_true`` is the text rule we apply to replies, and this function is the
    published rule for callers that score options by likelihood (kept computable side by side).
    """
    if len(logprobs) != len(true_mask) or not any(true_mask):
        raise ValueError("need one log-probability per option and at least one true option")
    top = max(logprobs)
    probs = [math.exp(lp - top) for lp in logprobs]
    return sum(p for p, t in zip(probs, true_mask) if t) / sum(probs)
