"""Run a Sleight of Word spec: build tasks, skip stored trials, call the swap engine, store per question.

Why per question: the engine finishes a question (clean run + every substitution) as a unit, and a
question's rows are written in one transaction as soon as it finishes, so an interrupted run loses at
most the questions in flight and resumes by skipping stored trial keys.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tamperbench.errors import UserError
from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.presets import SleightSpec, entity_phrase
from tamperbench.sleight.records import (
    CLEAN_TABLE,
    TRIALS_TABLE,
    SleightClean,
    SleightTrial,
    clean_key,
    count_whole_words,
    has_thinking,
    replacement_coverage,
    trial_record_key,
)
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


def validate(spec: SleightSpec) -> None:
    if not spec.questions:
        raise UserError("questions: the question list is empty; give at least one question")
    if not spec.substitutions:
        raise UserError("words: the substitution list is empty; give at least one word")
    if spec.max_new_tokens < 1:
        raise UserError(f"max_new_tokens: the token budget must be at least 1, got {spec.max_new_tokens}")


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


def clean_record(backend, spec: SleightSpec, qid: str, question: str, trace, key: str) -> SleightClean:
    tok = backend.tokenizer
    ids = list(trace.token_ids)
    text = tok.decode(ids, skip_special_tokens=True)
    return SleightClean(
        key=key, provenance_id=backend.provenance_id, model=spec.model, question_id=qid, question=question,
        prompt_text=backend.chat_text(_messages(question)), prompt_ids=backend.chat_ids(_messages(question)),
        max_new_tokens=spec.max_new_tokens, token_ids=ids, text=text,
        surprisal=_r(trace.logprobs, -1.0), entropy_full=_r(trace.entropy_full),
        entropy_top20=_r(trace.entropy_top20),
        topk_ids=trace.topk_ids if spec.keep_topk else None,
        topk_logprobs=[_r(row) for row in trace.topk_logprobs] if spec.keep_topk else None,
        whole_word_occurrences=count_whole_words(text, spec.triggers), finish_reason=trace.finish_reason,
        thinking=has_thinking(tok.decode(ids)), decode_seconds=float(trace.decode_seconds),
    )


def trial_record(backend, spec: SleightSpec, qid: str, question: str, prompt_text: str, substitution: str,
                 trace, clean_ids: list[int], ckey: str) -> SleightTrial:
    """One trial row: arrays from the fork with the clean answer on (the prefix is stored once)."""
    tok = backend.tokenizer
    ids = list(trace.token_ids)
    swaps = list(trace.swaps)
    fork = _common_prefix(ids, clean_ids)
    if swaps:
        fork = min(fork, swaps[0].position)
    text = tok.decode(ids, skip_special_tokens=True)
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
        occurrences=occ, coverage=cov, untouched=not swaps, thinking=has_thinking(tok.decode(ids)),
        finish_reason=trace.finish_reason, decode_seconds=float(trace.decode_seconds),
    )


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]sleight[/bold]"), BarColumn(), MofNCompleteColumn(), TextColumn("trials"),
        TextColumn("{task.fields[swaps]} swaps"), TextColumn("{task.fields[tps]:.0f} tok/s"),
        TimeElapsedColumn(), TimeRemainingColumn(), console=console,
    )


def run(spec: SleightSpec, out: str | Path, *, new: bool = False, backend=None,
        console: Console | None = None) -> RunReport:
    """Run (or resume) ``spec`` into ``out``; returns what was done."""
    validate(spec)
    console = console or Console(stderr=True)
    if backend is None:
        from tamperbench.models import load_backend

        backend = load_backend(spec.model, device=spec.device, dtype=spec.dtype, batch_size=spec.batch_size)
    from tamperbench.sleight.engine import QuestionTask, SwapEngine

    detector = TriggerDetector(backend.tokenizer, spec.triggers)
    for t in detector.unproducible:
        console.print(f"[yellow]warning:[/yellow] trigger '{t}' is never a whole-word token of this tokenizer; "
                      "it cannot be swapped (coverage 0)")
    pid = backend.provenance_id
    store = RunStore.open(out, spec, new=new)
    try:
        store.put_provenance(backend.provenance)
        store.ensure_table(CLEAN_TABLE, SleightClean)
        store.ensure_table(TRIALS_TABLE, SleightTrial)
        have_trials, have_clean = store.keys(TRIALS_TABLE), store.keys(CLEAN_TABLE)
        tasks, meta, total, skipped = [], {}, 0, 0
        for qid, question in spec.questions:
            ckey = clean_key(pid, qid, question, spec)
            todo = []
            for sub in spec.substitutions:
                total += 1
                if trial_record_key(pid, qid, question, sub, spec) in have_trials:
                    skipped += 1
                else:
                    todo.append(sub)
            need_clean = ckey not in have_clean
            if not todo and not need_clean:
                continue
            prompt_ids = backend.chat_ids(_messages(question))
            meta[qid] = (question, backend.chat_text(_messages(question)), ckey)
            tasks.append(QuestionTask(question_id=qid, prompt_ids=prompt_ids, substitutions=todo, need_clean=need_clean))
        report = RunReport(str(out), total, skipped, 0, 0, 0, 0, 0.0, detector.unproducible)
        if not tasks:
            console.print(f"nothing to do: all {total} trials of this spec are stored in {out}")
            return report
        engine = SwapEngine(backend, detector, max_new_tokens=spec.max_new_tokens, batch_size=spec.batch_size,
                            window=spec.window, topk=spec.topk, keep_topk=spec.keep_topk)
        t0 = time.perf_counter()
        with _progress(console) as prog:
            bar = prog.add_task("trials", total=total, completed=skipped, swaps=0, tps=0.0)

            def live(stats: dict) -> None:  # called by the engine after every decoding step
                prog.update(bar, swaps=stats["swaps"], tps=stats["tokens"] / max(stats["seconds"], 1e-9))

            for qres in engine.run(tasks, progress=live):
                question, prompt_text, ckey = meta[qres.question_id]
                if qres.clean is not None:
                    rec = clean_record(backend, spec, qres.question_id, question, qres.clean, ckey)
                    report.clean_written += store.write(CLEAN_TABLE, [rec])
                    clean_ids = list(qres.clean.token_ids)
                else:
                    rows = store.rows(CLEAN_TABLE, "WHERE key = ?", [ckey])
                    clean_ids = rows[0]["token_ids"] if rows else []
                recs = [trial_record(backend, spec, qres.question_id, question, prompt_text, sub, tr, clean_ids, ckey)
                        for sub, tr in qres.trials.items()]
                report.trials_written += store.write(TRIALS_TABLE, recs)
                report.swaps += sum(r.swap_count for r in recs)
                prog.update(bar, advance=len(recs))
        report.seconds = time.perf_counter() - t0
        report.tokens = engine.stats["tokens"]
        return report
    finally:
        store.close()
