"""Sleight of Word's run: its worker (the swap engine over pending questions, importable by name:
``WORKER``), the records it builds, and its suite definition (``SUITE``) for the run driver
(:mod:`tamperbench.runs.driver`), which plans (sleight/plan.py), executes and commits.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.plan import QuestionWork, pending, run_plan, unit_row_tokens
from tamperbench.sleight.protocol import entity_phrase
from tamperbench.sleight.spec import SleightSpec
from tamperbench.sleight.records import (
    CLEAN_TABLE,
    TRIALS_TABLE,
    SleightClean,
    SleightTrial,
    count_whole_words,
    has_thinking,
    replacement_coverage,
    trial_record_key,
)
from tamperbench.runs.driver import Executor, Planned, SuiteDef
from tamperbench.runs.driver import run as drive
from tamperbench.runs.units import Finished, WorkUnit
from tamperbench.store import RunStore


@dataclass
class RunReport:
    run_dir: str
    trials_total: int
    trials_skipped: int
    trials_written: int
    clean_written: int
    swaps: int
    tokens: int
    seconds: float
    unproducible: tuple[str, ...]


def _messages(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


DIGITS = 5  # stored per-token values are rounded to 1e-5 nats: DuckDB then compresses them as decimals (ALP)


def _r(xs, sign: float = 1.0) -> list[float]:
    return [round(sign * float(x), DIGITS) for x in xs]


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _batch(batch) -> dict:
    """The record fields naming the engine's slot choice (a memory.BatchChoice; None: not recorded)."""
    return {} if batch is None else {"batch_rows": batch.rows, "batch_by": batch.by}


def clean_record(backend, spec: SleightSpec, qid: str, question: str, trace, key: str, batch=None) -> SleightClean:
    ids = list(trace.token_ids)
    text = backend.decode(ids, skip_special_tokens=True)
    return SleightClean(
        key=key, provenance_id=backend.provenance_id, model=spec.model, question_id=qid, question=question,
        prompt_text=backend.chat_text(_messages(question)), prompt_ids=backend.chat_ids(_messages(question)),
        max_new_tokens=spec.max_new_tokens, token_ids=ids, text=text,
        surprisal=_r(trace.logprobs, -1.0), entropy_full=_r(trace.entropy_full),
        entropy_top20=_r(trace.entropy_top20),
        topk_ids=trace.topk_ids if spec.keep_topk else None,
        topk_logprobs=[_r(row) for row in trace.topk_logprobs] if spec.keep_topk else None,
        whole_word_occurrences=count_whole_words(text, spec.triggers), finish_reason=trace.finish_reason,
        thinking=has_thinking(backend.decode(ids, skip_special_tokens=False)), decode_seconds=float(trace.decode_seconds),
        **_batch(batch),
    )


def trial_record(backend, spec: SleightSpec, qid: str, question: str, prompt_text: str, substitution: str,
                 trace, clean_ids: list[int], ckey: str, batch=None) -> SleightTrial:
    """One trial row: arrays from the fork with the clean answer on (the prefix is stored once)."""
    ids = list(trace.token_ids)
    swaps = list(trace.swaps)
    fork = _common_prefix(ids, clean_ids)
    if swaps:
        fork = min(fork, swaps[0].position)
    text = backend.decode(ids, skip_special_tokens=True)
    special = backend.decode(ids, skip_special_tokens=False)
    occ, cov = replacement_coverage(text, spec.triggers, substitution, len(swaps), trace.spaceless)
    keep = spec.keep_topk and trace.topk_ids is not None
    return SleightTrial(
        key=trial_record_key(backend.provenance_id, qid, question, substitution, spec),
        provenance_id=backend.provenance_id, model=spec.model, question_id=qid, question=question,
        prompt_text=prompt_text, trigger=",".join(spec.triggers), substitution=substitution,
        entity=substitution == entity_phrase(), clean_key=ckey, reaction_text=text, fork_at=fork,
        n_tokens=len(ids), token_ids=ids[fork:], surprisal=_r(trace.logprobs[fork:], -1.0),
        entropy_full=_r(trace.entropy_full[fork:]), entropy_top20=_r(trace.entropy_top20[fork:]),
        topk_ids=trace.topk_ids[fork:] if keep else None,
        topk_logprobs=[_r(row) for row in trace.topk_logprobs[fork:]] if keep else None,
        injected=[i for i, f in enumerate(trace.injected) if f],
        swap_positions=[s.position for s in swaps], swap_injected=[s.n_injected for s in swaps],
        matched_surprisal=[_r(s.matched_clean_logprobs, -1.0) for s in swaps],
        matched_entropy_full=[_r(s.matched_clean_entropy_full) for s in swaps],
        matched_entropy_top20=[_r(s.matched_clean_entropy_top20) for s in swaps],
        swap_count=len(swaps), mentions=int(trace.mentions), spaceless=int(trace.spaceless),
        occurrences=occ, coverage=cov, untouched=not swaps, thinking=has_thinking(special),
        finish_reason=trace.finish_reason, decode_seconds=float(trace.decode_seconds), **_batch(batch),
        reaction_text_special=special,
    )


@dataclass
class SleightContext:
    """What a worker process holds: the loaded backend, the trigger detector and the spec."""

    backend: Any  # a ChatBackend (duck-typed: a test may wrap one)
    detector: TriggerDetector
    spec: SleightSpec


def setup_worker(spec: SleightSpec) -> SleightContext:
    """Worker setup for an executor in another process: load the model named by the spec."""
    from tamperbench.models import load_backend

    backend = load_backend(spec.model, device=spec.device, dtype=spec.dtype, batch_size=spec.batch_size,
                           chat_template=spec.chat_template)
    return SleightContext(backend, TriggerDetector(backend.tokenizer, spec.triggers, rules=spec.detector_rules,
                                    replacement_case=spec.replacement_case), spec)


def _engine_class(backend) -> type:
    """The in-process swap engine for a backend that can step-decode; otherwise the black-box engine
    over a completions endpoint (it refuses, in one line, a backend without log-prob completions)."""
    from tamperbench.models.protocols import StepBackend

    if isinstance(backend, StepBackend):
        from tamperbench.sleight.engine import SwapEngine

        return SwapEngine
    from tamperbench.sleight.blackbox import BlackBoxEngine

    return BlackBoxEngine


def work(ctx: SleightContext, units: list[WorkUnit], live=None) -> Iterator[list[Finished]]:
    """Decode every unit's question in one batched swap engine; yield each question as it finishes."""
    from tamperbench.sleight.engine import QuestionTask

    backend, spec = ctx.backend, ctx.spec
    by_qid = {u.payload.question_id: u for u in units}
    tasks = [QuestionTask(question_id=u.payload.question_id, prompt_ids=backend.chat_ids(_messages(u.payload.question)),
                          substitutions=list(u.payload.substitutions), need_clean=u.payload.need_clean) for u in units]
    engine = _engine_class(backend)(backend, ctx.detector, max_new_tokens=spec.max_new_tokens,
                                    batch_size=spec.batch_size, window=spec.window, topk=spec.topk,
                                    keep_topk=spec.keep_topk)
    tokens = 0
    for qres in engine.run(tasks, progress=live):
        unit = by_qid[qres.question_id]
        q: QuestionWork = unit.payload
        records: dict[str, list] = {}
        clean_ids = list(q.clean_ids)
        if qres.clean is not None:
            records[CLEAN_TABLE] = [clean_record(backend, spec, q.question_id, q.question, qres.clean, q.clean_key,
                                                 getattr(engine, "batch", None))]
            clean_ids = list(qres.clean.token_ids)
        prompt_text = backend.chat_text(_messages(q.question))
        trials = [trial_record(backend, spec, q.question_id, q.question, prompt_text, sub, tr, clean_ids, q.clean_key,
                               getattr(engine, "batch", None)) for sub, tr in qres.trials.items()]
        records[TRIALS_TABLE] = trials
        stats = {"trials": len(trials), "swaps": sum(r.swap_count for r in trials),
                 "tokens": engine.stats["tokens"] - tokens}
        tokens = engine.stats["tokens"]
        yield [Finished(unit.key, records, stats)]


WORKER = "tamperbench.sleight.runner:setup_worker", "tamperbench.sleight.runner:work"


def plan(spec: SleightSpec, store: RunStore, pid: str) -> tuple[list[WorkUnit], int, int]:
    """Pending questions as work units, trials in the spec and trials already stored (sleight/plan.py)."""
    return pending(spec, store, pid)


def _planned(spec: SleightSpec, store: RunStore, pid: str, model: str) -> Planned:
    units, total, skipped = pending(spec, store, pid)
    return Planned(units, total, skipped)


def _context(spec: SleightSpec, backend, console: Console) -> SleightContext:
    """The worker's context on the loaded backend; warns (once, before the store opens) about every trigger
    this tokenizer never writes as a whole-word token."""
    detector = TriggerDetector(backend.tokenizer, spec.triggers, rules=spec.detector_rules,
                               replacement_case=spec.replacement_case)
    for t in detector.unproducible:
        console.print(f"[yellow]warning:[/yellow] trigger '{t}' is never a whole-word token of this tokenizer; "
                      "it cannot be swapped (coverage 0)")
    return SleightContext(backend, detector, spec)


SUITE = SuiteDef(
    name="sleight", spec=SleightSpec, tables=((CLEAN_TABLE, SleightClean), (TRIALS_TABLE, SleightTrial)),
    worker=WORKER, plan=_planned, context=_context,
    needs=("ChatBackend",),  # step decoding when the backend offers it, else the black-box engine
    row_tokens=unit_row_tokens, estimate=run_plan, unit="trials", weight=lambda f: f.stats["trials"],
    shown=("swaps",))


def run(spec: SleightSpec, out: str | Path, *, new: bool = False, backend=None,
        console: Console | None = None, executor: Executor | None = None) -> RunReport:
    """Run (or resume) ``spec`` into ``out`` through the run driver; returns what was done."""
    res = drive(SUITE, spec, out, new=new, backend=backend, console=console, executor=executor)
    ctx = next(iter(res.contexts.values()))
    return RunReport(str(out), res.total, res.done, res.written[TRIALS_TABLE], res.written[CLEAN_TABLE],
                     res.stats["swaps"], res.stats["tokens"], res.seconds, ctx.detector.unproducible)
