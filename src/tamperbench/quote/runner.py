"""Run the quote suite on a backend and store every response, scored, in the run's database.

Why per-batch transactions keyed by trial: a long run on a slow model can be interrupted and
resumed with the same command; stored trials are skipped, and a batch is either fully stored
or not at all. Every record carries the exact prompt text, decoding settings, the seed and the
position it had in its generation call, the batch size, and the provenance id of the weights.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.models.protocols import GenerationProgress, MemoryRowsBackend
from tamperbench.quote import sampling as sampling_rule
from tamperbench.quote.items import DATA_DIR, Item, build_prompt, document_for, load_items
from tamperbench.quote.scorer import score_response
from tamperbench.runs import Executor, Finished, InProcessExecutor, Worker, WorkUnit, commit, progress_bar
from tamperbench.specs import BatchSize, FrozenSpec, NewTokens, Repeats, Seed, Temperature
from tamperbench.store import Record, RunStore, trial_key

TABLE = "quote_trials"


class QuoteRunSpec(FrozenSpec):
    """Everything that defines a quote run; frozen into the run directory's spec.json.

    Checked by field constraints and one cross-field validator, so flags and spec files obey the
    same rules before any run directory is created.
    """

    cli_flags: ClassVar[dict[str, str]] = {"arms": "--arm", "item_ids": "--items"}

    suite: Literal["quote"] = "quote"
    model: str = Field(default="embedded", min_length=1)
    preset: Literal["standard", "depth", "colon", "code"] = "standard"
    arms: list[Literal["plain", "strict"]] = Field(default=["plain", "strict"], min_length=1)
    sampling: sampling_rule.Sampling = "greedy"  # paper: sample at the temperature/repeats below (quote/sampling.py)
    repeats: Repeats = 1
    temperature: Temperature = Field(default=0.0, validate_default=True)
    seed: Seed = 0
    max_new_tokens: NewTokens = 96
    device: str = "auto"
    dtype: str | None = None
    batch_size: BatchSize | None = None
    chat_template: str | None = None  # None: the model's own; "none": raw prompt; else a Jinja file
    item_ids: list[str] | None = Field(default=None, min_length=1)  # a subset of the preset's items (None = all)
    data_sha256: str = ""  # hash of the documents + items the run was asked against

    @model_validator(mode="before")
    @classmethod
    def _paper_sampling_defaults(cls, data: object) -> object:
        return sampling_rule.resolve(data)

    @field_validator("temperature")
    @classmethod
    def _sampled_repeats(cls, temperature: float, info: ValidationInfo) -> float:
        if info.data.get("sampling") == "paper" and temperature == 0:
            raise ValueError("--sampling paper samples: give a temperature > 0 (default 1.0)")
        if info.data.get("repeats", 1) > 1 and temperature == 0:
            raise ValueError("repeats > 1 needs temperature > 0 (greedy repeats are identical)")
        return temperature

    @field_validator("item_ids")
    @classmethod
    def _known_items(cls, item_ids: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if item_ids is not None and "preset" in info.data:
            unknown = sorted(set(item_ids) - {it.id for it in load_items(info.data["preset"])})
            if unknown:
                raise ValueError(f"{', '.join(unknown)} not in preset {info.data['preset']!r}")
        return item_ids


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
    seed: int
    sampling: str | None = None  # greedy | paper (None: stored before the option)
    sample_index: int  # position in its generate_chat call (sampling seeds depend on it)
    max_new_tokens: int
    batch_size: int
    answer: str | None = None
    category: str
    sub_label: str | None = None
    evidence: dict


def data_sha256() -> str:
    """Hash of every data file, so a record says which version of the items it answered."""
    h = hashlib.sha256()
    for path in sorted([DATA_DIR / "items.json", *DATA_DIR.glob("documents/*.txt")]):
        if path.is_file():
            h.update(path.relative_to(DATA_DIR).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@dataclass
class Trial:
    key: str
    item: Item
    arm: str
    repeat: int
    prompt: str


def build_trials(spec: QuoteRunSpec) -> list[Trial]:
    trials = []
    for repeat in range(spec.repeats):
        for item in load_items(spec.preset):
            if spec.item_ids is not None and item.id not in spec.item_ids:
                continue
            for arm in spec.arms:
                key = trial_key({"suite": "quote", "model": spec.model, "preset": spec.preset,
                                 "item_id": item.id, "arm": arm, "repeat": repeat,
                                 "temperature": spec.temperature, "seed": spec.seed,
                                 "max_new_tokens": spec.max_new_tokens, "data": spec.data_sha256})
                trials.append(Trial(key, item, arm, repeat, build_prompt(item, arm)))
    return trials


@dataclass
class QuoteContext:
    """What a worker process holds: the loaded backend and the spec."""

    backend: Any  # a ChatBackend (duck-typed: a test may wrap one)
    spec: QuoteRunSpec


def setup_worker(spec: QuoteRunSpec) -> QuoteContext:
    """Worker setup for an executor in another process: load the model named by the spec."""
    from tamperbench.models import load_backend

    return QuoteContext(load_backend(spec.model, device=spec.device, dtype=spec.dtype, batch_size=spec.batch_size,
                                     chat_template=spec.chat_template), spec)


def work(ctx: QuoteContext, units: list[WorkUnit], live=None) -> Iterator[list[Finished]]:
    """Generate and score the units in calls of about the backend's batch size that keep a document's
    trials together (:func:`generation_calls`), one seed per repeat; yield each call as it finishes. A record stores its position and chunk size (seeds depend on them).
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
                gens = backend.generate_chat([[{"role": "user", "content": t.prompt}] for t in chunk],
                                             max_new_tokens=spec.max_new_tokens, temperature=spec.temperature,
                                             seed=spec.seed + repeat, progress=listen if live is not None else None)
            decoded += sum(len(g.token_ids) for g in gens)
            yield [Finished(t.key, {TABLE: [_record(spec, pid, t, g, i, len(chunk))]})
                   for i, (t, g) in enumerate(zip(chunk, gens))]


WORKER = "tamperbench.quote.runner:setup_worker", "tamperbench.quote.runner:work"

MAX_CALL_BATCHES = 4  # a document's trials share one call up to this many batches


def call_size(backend, batch_size: int | None) -> tuple[int, bool, bool]:
    """(trials a generation call packs, keep a document's trials in one call, decode a call's rows as
    memory allows) for ``backend`` under the user's ``--batch-size`` (None: not given).

    Only a backend that prefills a shared prefix once gains from keeping a document's trials in one
    call; a remote one (each request alone) keeps calls of its batch size, so a server dying mid-run
    loses at most one call's answers (each call is one commit). A local one without ``--batch-size``
    packs documents into calls of up to ``MAX_CALL_BATCHES`` load-time batches and decodes each call's
    rows at once as far as memory allows (the ``MemoryRowsBackend`` capability, models/protocols.py): the ``standard``
    preset's 74 trials are one call of 74 rows, not 58 rows and then 16 (each wave pays every step's
    fixed cost). An explicit ``--batch-size`` stays the cap on both."""
    bs = max(1, int(backend.max_batch_size))
    keep = callable(getattr(backend, "prefix_memory", None))
    by_memory = keep and batch_size is None and isinstance(backend, MemoryRowsBackend)
    return (MAX_CALL_BATCHES * bs if by_memory else bs), keep, by_memory


def generation_calls(trials: list[Trial], bs: int, *, keep_documents: bool = True) -> list[list[Trial]]:
    """Cut trials (in plan order, a document's trials adjacent) into ``generate_chat`` calls of
    about ``bs`` trials that never split a document's trials.

    Why: each call prefills a shared prefix once (models/prefix_share.py), so a document cut in two
    is read twice: the ``depth`` preset's ~3,100-token fused document for its 74 trials in two
    calls of 64 and 10. A document's trials stay in one call up to ``MAX_CALL_BATCHES`` x ``bs``
    (each call is also one commit, so this bounds the work a crash can lose); within a call the
    rows decoded at once are what memory allows (models/memory.py). ``keep_documents=False``: plain
    calls of ``bs`` trials in plan order (backends that share no prefix)."""
    if not keep_documents:
        return [trials[i:i + bs] for i in range(0, len(trials), bs)]
    calls: list[list[Trial]] = []
    cur: list[Trial] = []
    for doc in _runs_by_document(trials):
        if cur and len(cur) + len(doc) > bs:
            calls.append(cur)
            cur = []
        for start in range(0, len(doc), MAX_CALL_BATCHES * bs):
            piece = doc[start:start + MAX_CALL_BATCHES * bs]
            if len(piece) == MAX_CALL_BATCHES * bs:
                calls.append(piece)
            else:
                cur.extend(piece)
    if cur:
        calls.append(cur)
    return calls


def _runs_by_document(trials: list[Trial]) -> list[list[Trial]]:
    runs: list[list[Trial]] = []
    for t in trials:
        doc = document_for(t.item).id
        if runs and document_for(runs[-1][-1].item).id == doc:
            runs[-1].append(t)
        else:
            runs.append([t])
    return runs


def plan(spec: QuoteRunSpec, store: RunStore) -> list[WorkUnit]:
    """Pending trials, sorted by prompt text so a document's items and both arms share a batch
    (its prefix is prefilled once: models/prefix_share.py); repeats stay apart (one seed each)."""
    done = store.keys(TABLE)
    todo = [t for t in build_trials(spec) if t.key not in done]
    todo.sort(key=lambda t: (t.repeat, t.prompt))
    return [WorkUnit(t.key, t) for t in todo]


def run_quote(spec: QuoteRunSpec, out: Path, *, backend=None, new: bool = False,
              progress: bool = True, executor: Executor | None = None, console: Console | None = None) -> RunStore:
    """Generate, score and store every missing trial of ``spec`` in run directory ``out``: plan, execute, commit.

    The bar counts decoded tokens against the dry run's bound (the registry's ``row_tokens``, quote/plan.py) and
    shows ``estimate.EtaTracker``'s remaining time, as the Sleight of Word bar does: per decoding
    step when the executor forwards ``live`` (in process), else per committed call."""
    spec = spec.model_copy(update={"data_sha256": data_sha256()})
    RunStore.preflight(out, spec, new=new)  # a bad --out costs no model load
    if backend is None:
        from tamperbench.models import load_backend

        backend = load_backend(spec.model, device=spec.device, dtype=spec.dtype, batch_size=spec.batch_size,
                               chat_template=spec.chat_template)
    from tamperbench.suites import get_suite

    get_suite("quote").check_backend(backend)  # one line, before any compute, if it cannot chat
    store = RunStore.open(out, spec, new=new)
    store.ensure_table(TABLE, QuoteTrial)
    store.put_provenance(backend.provenance)
    units = plan(spec, store)
    stored = store.count(TABLE)
    from tamperbench.progress import ETA_FIELDS, countdown as bar_countdown

    countdown = bar_countdown("quote", spec, units)  # the --dry-run's bound (registry row_tokens), live rate
    committed = 0
    with progress_bar("quote", *ETA_FIELDS, unit="trials", console=console, disable=not progress) as prog:
        task = prog.add_task(f"{spec.preset} ({stored} stored)", total=len(units), **countdown.fields())
        countdown.attach(prog, task)

        def on_batch(batch: list[Finished], _) -> None:  # a committed call: its records' decoded tokens
            nonlocal committed
            committed += sum(r.n_new_tokens for f in batch for r in f.records[TABLE])  # type: ignore[attr-defined]
            countdown.update(committed)
            prog.update(task, advance=len(batch))

        live = lambda stats: countdown.update(stats["tokens"])  # noqa: E731 -- after every decoding step
        executor = executor or InProcessExecutor(QuoteContext(backend, spec), live=live)
        commit(store, executor.execute(units, Worker(*WORKER, config=spec)), on_batch=on_batch)
    return store


def run(spec: QuoteRunSpec, out: Path, *, new: bool = False, backend=None, progress: bool = True,
        executor: Executor | None = None) -> None:
    """The registry's runner (``tamperbench run SPEC.json``, sweeps): run or resume, then close the store."""
    run_quote(spec, Path(out), backend=backend, new=new, progress=progress, executor=executor).close()


def _record(spec: QuoteRunSpec, pid: str, t: Trial, g, index: int, batch: int) -> QuoteTrial:
    verdict = score_response(t.item, g.text)
    return QuoteTrial(
        key=t.key, provenance_id=pid, model=spec.model, preset=spec.preset, item_id=t.item.id,
        doc_id=t.item.doc_id, arm=t.arm, repeat=t.repeat, dirty=t.item.dirty,
        planted_kind=t.item.planted.kind if t.item.planted else None, gold=t.item.gold,
        instruction=t.item.instruction(t.arm), prompt_text=g.prompt_text, n_prompt_tokens=len(g.prompt_ids),
        response=g.text, n_new_tokens=len(g.token_ids), finish_reason=g.finish_reason,
        temperature=spec.temperature, seed=spec.seed + t.repeat, sampling=spec.sampling, sample_index=index,
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
