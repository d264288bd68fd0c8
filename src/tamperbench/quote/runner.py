"""Exact Words' run: its worker (generate and score the pending trials in generation calls, importable by
name: ``WORKER``), the record it stores, and its suite definition (``SUITE``) for the run driver
(:mod:`tamperbench.runs.driver`), which plans (quote/plan.py), executes and commits.

Every record carries the exact prompt text, decoding settings, the seed and the position it had in its
generation call, the batch size, and the provenance id of the weights.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.models.protocols import GenerationProgress
from tamperbench.quote.plan import (MAX_CALL_BATCHES, TABLE, Trial, build_trials, call_size, generation_calls, pending,
                                    run_plan, trial_seed, unit_row_tokens)
from tamperbench.quote.scorer import score_response
from tamperbench.quote.spec import QuoteRunSpec, data_sha256, with_data_hash
from tamperbench.runs.driver import Executor, Planned, SuiteDef
from tamperbench.runs.driver import run as drive
from tamperbench.runs.units import Finished, WorkUnit
from tamperbench.store import Record, RunStore

__all__ = ["MAX_CALL_BATCHES", "SUITE", "TABLE", "WORKER", "QuoteContext", "QuoteRunSpec", "QuoteTrial", "Trial",
           "build_trials", "call_size", "data_sha256", "generation_calls", "plan", "rescore_run", "run", "run_quote",
           "setup_worker", "work"]



class QuoteTrial(Record):
    """One scored response. Columns, not a blob, so SQL and exports read them directly."""

    model: str
    preset: str
    item_id: str
    doc_id: str
    arm: str
    repeat: int
    dirty: bool
    planted_kind: str | None = None
    gold: str
    instruction: str
    prompt_text: str
    n_prompt_tokens: int
    response: str
    n_new_tokens: int
    finish_reason: str
    temperature: float
    seed: int  # the answer's own sampling seed under sample_seed "trial"; else its repeat's seed
    sampling: str | None = None  # greedy | paper (None: stored before the option)
    sample_seed: str | None = None  # trial | position (spec.sample_seed; None: greedy, or stored before the option)
    sample_index: int  # position in its generate_chat call (the seed depends on it under sample_seed "position")
    max_new_tokens: int
    batch_size: int
    answer: str | None = None
    category: str
    sub_label: str | None = None
    evidence: dict


@dataclass
class QuoteContext:
    """What a worker process holds: the loaded backend and the spec."""

    backend: Any  # a ChatBackend (duck-typed: a test may wrap one)
    spec: QuoteRunSpec


def setup_worker(spec: QuoteRunSpec) -> QuoteContext:
    """Worker setup for an executor in another process: load the model named by the spec."""
    from tamperbench.runs.driver import load_model

    return QuoteContext(load_model(spec, spec.model), spec)


def work(ctx: QuoteContext, units: list[WorkUnit], live=None) -> Iterator[list[Finished]]:
    """Generate and score the units in calls of about the backend's batch size that keep a document's
    trials together (:func:`generation_calls`), each sampled trial seeded by its identity (``plan.trial_seed``; runs
    made before: by its repeat and place in the call); yield each call as it finishes. A record stores its seed,
    its place in the call and the call's size.
    ``live`` gets ``{"tokens", "seconds"}`` (decoded so far in this ``work``) after every decoding step
    of a backend that reports it (``generate_chat``'s ``progress`` listener), for the bar's ETA."""
    backend, spec = ctx.backend, ctx.spec
    pid = backend.provenance.id
    bs, keep_documents, by_memory = call_size(backend, spec.batch_size)
    trials: list[Trial] = [u.payload for u in units]
    t0, decoded = time.perf_counter(), 0

    def listen(event: GenerationProgress) -> None:  # event.tokens: so far in the current call
        if live is not None:
            live({"tokens": decoded + event.tokens, "seconds": time.perf_counter() - t0})

    for repeat in sorted({t.repeat for t in trials}):
        for chunk in generation_calls([t for t in trials if t.repeat == repeat], bs, keep_documents=keep_documents):
            with backend.rows_from_memory() if by_memory else nullcontext():
                seeds = _seeds(spec, chunk)
                gens = backend.generate_chat([[{"role": "user", "content": t.prompt}] for t in chunk],
                                             max_new_tokens=spec.max_new_tokens, temperature=spec.temperature,
                                             seed=seeds, progress=listen if live is not None else None)
            decoded += sum(len(g.token_ids) for g in gens)
            yield [Finished(t.key, {TABLE: [_record(spec, pid, t, g, i, len(chunk), seeds)]},
                            {"tokens": len(g.token_ids)}) for i, (t, g) in enumerate(zip(chunk, gens))]


def _seeds(spec: QuoteRunSpec, chunk: list[Trial]) -> int | list[int]:
    """What ``generate_chat`` seeds the chunk with: each trial's own seed (``sample_seed="trial"``), else the
    repeat's seed, which the backend combines with each answer's place in the call (runs made before)."""
    if spec.sample_seed == "trial":
        return [trial_seed(spec, t) for t in chunk]
    return spec.seed + chunk[0].repeat


WORKER = "tamperbench.quote.runner:setup_worker", "tamperbench.quote.runner:work"

def plan(spec: QuoteRunSpec, store: RunStore) -> list[WorkUnit]:
    """Pending trials as work units (quote/plan.py)."""
    return pending(spec, store)


def _planned(spec: QuoteRunSpec, store: RunStore, pid: str, model: str) -> Planned:
    units = pending(spec, store)
    total = len(build_trials(spec))
    return Planned(units, total, total - len(units), label=spec.preset)


SUITE = SuiteDef(
    name="quote", spec=QuoteRunSpec, tables=((TABLE, QuoteTrial),), worker=WORKER, plan=_planned,
    context=lambda spec, backend, console: QuoteContext(backend, spec), prepare=with_data_hash,
    needs=("ChatBackend",), row_tokens=unit_row_tokens, estimate=run_plan, unit="trials")


def run_quote(spec: QuoteRunSpec, out: Path, *, backend=None, new: bool = False,
              progress: bool = True, executor: Executor | None = None, console: Console | None = None) -> RunStore:
    """Generate, score and store every missing trial of ``spec`` in run directory ``out`` through the run
    driver; returns the run's store, open. The bar counts decoded tokens against the dry run's bound
    (quote/plan.py), per decoding step in process, else per committed call."""
    drive(SUITE, spec, out, new=new, backend=backend, executor=executor, console=console, progress=progress)
    return RunStore.open_existing(out)


def run(spec: QuoteRunSpec, out: Path, *, new: bool = False, backend=None, progress: bool = True,
        executor: Executor | None = None) -> None:
    """The registry's runner (a Python caller; ``tamperbench run`` and sweeps use ``SUITE``)."""
    drive(SUITE, spec, Path(out), new=new, backend=backend, progress=progress, executor=executor)


def _record(spec: QuoteRunSpec, pid: str, t: Trial, g, index: int, batch: int, seeds: int | list[int]) -> QuoteTrial:
    verdict = score_response(t.item, g.text)
    return QuoteTrial(
        key=t.key, provenance_id=pid, model=spec.model, preset=spec.preset, item_id=t.item.id,
        doc_id=t.item.doc_id, arm=t.arm, repeat=t.repeat, dirty=t.item.dirty,
        planted_kind=t.item.planted.kind if t.item.planted else None, gold=t.item.gold,
        instruction=t.item.instruction(t.arm), prompt_text=g.prompt_text, n_prompt_tokens=len(g.prompt_ids),
        response=g.text, n_new_tokens=len(g.token_ids), finish_reason=g.finish_reason,
        temperature=spec.temperature, seed=seeds[index] if isinstance(seeds, list) else seeds,
        sampling=spec.sampling, sample_seed=spec.sample_seed, sample_index=index,
        max_new_tokens=spec.max_new_tokens, batch_size=batch, answer=verdict.answer,
        category=verdict.category, sub_label=verdict.sub_label, evidence=verdict.evidence)


def rescore_run(run_dir: Path) -> tuple[int, int]:
    """Re-apply the current scorer to every stored response; returns (rows, verdicts changed).

    Why: the grader is always the first suspect. When the scorer is fixed, stored responses
    are re-scored in place (one transaction) instead of being regenerated.
    """
    import json

    from tamperbench.quote.items import items_by_id

    store = RunStore.open_existing(run_dir)
    try:
        if not store.has_table(TABLE):
            raise UserError(f"{run_dir}: no quote trials stored")
        known = items_by_id()
        rows = store.con.execute(f'SELECT key, item_id, response, category, sub_label, evidence FROM "{TABLE}"').fetchall()
        updates = []
        for key, item_id, response, category, sub_label, evidence in rows:
            if item_id not in known:
                raise UserError(f"{run_dir}: stored item {item_id!r} is not in this version's items")
            v = score_response(known[item_id], response)
            if (v.category, v.sub_label, v.evidence) != (category, sub_label, json.loads(evidence)):
                updates.append([v.category, v.sub_label, v.answer, json.dumps(v.evidence), key])
        if updates:  # one transaction: a failure leaves every stored verdict as it was
            with store.transaction() as con:
                con.executemany(f'UPDATE "{TABLE}" SET category = ?, sub_label = ?, answer = ?, '
                                f'evidence = CAST(? AS JSON) WHERE key = ?', updates)
        return len(rows), len(updates)
    finally:
        store.close()
