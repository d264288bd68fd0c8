"""Run the quote suite on a backend and store every response, scored, in the run's database.

Why per-batch transactions keyed by trial: a long run on a slow model can be interrupted and
resumed with the same command; stored trials are skipped, and a batch is either fully stored
or not at all. Every record carries the exact prompt text, decoding settings, the seed and the
position it had in its generation call, the batch size, and the provenance id of the weights.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text

from tamperbench.errors import UserError
from tamperbench.quote.items import ARMS, DATA_DIR, Item, build_prompt, load_items
from tamperbench.quote.scorer import score_response
from tamperbench.store import Record, RunStore, trial_key

TABLE = "quote_trials"


class QuoteRunSpec(BaseModel):
    """Everything that defines a quote run; frozen into the run directory's spec.json."""

    suite: str = "quote"
    model: str = "embedded"
    preset: str = "standard"
    arms: list[str] = ["plain", "strict"]
    repeats: int = 1
    temperature: float = 0.0
    seed: int = 0
    max_new_tokens: int = 96
    device: str = "auto"
    dtype: str | None = None
    batch_size: int | None = None
    item_ids: list[str] | None = None  # a subset of the preset's items (None = all)
    data_sha256: str = ""  # hash of the documents + items the run was asked against

    def check(self) -> "QuoteRunSpec":
        if any(a not in ARMS for a in self.arms) or not self.arms:
            raise UserError(f"--arm must be plain, strict or both; got {self.arms}")
        if self.repeats < 1:
            raise UserError(f"--repeats must be at least 1, got {self.repeats}")
        if self.repeats > 1 and self.temperature == 0:
            raise UserError("--repeats > 1 needs --temperature > 0 (greedy repeats are identical)")
        if self.temperature < 0:
            raise UserError(f"--temperature must be >= 0, got {self.temperature}")
        if self.max_new_tokens < 1:
            raise UserError(f"--max-new-tokens must be at least 1, got {self.max_new_tokens}")
        if self.batch_size is not None and self.batch_size < 1:
            raise UserError(f"--batch-size must be a positive integer, got {self.batch_size}")
        known = {it.id for it in load_items(self.preset)}  # raises UserError for an unknown preset
        unknown = sorted(set(self.item_ids or []) - known)
        if unknown:
            raise UserError(f"--items: {', '.join(unknown)} not in preset {self.preset!r}")
        if self.item_ids is not None and not self.item_ids:
            raise UserError("--items: empty list")
        return self


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


class _RateColumn(ProgressColumn):
    def render(self, task) -> Text:
        return Text(f"{task.speed:.2f} trials/s" if task.speed else "- trials/s")


def _progress() -> Progress:
    return Progress(TextColumn("[bold]quote[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                    _RateColumn(), TimeElapsedColumn(), TimeRemainingColumn())


def run_quote(spec: QuoteRunSpec, out: Path, *, backend=None, new: bool = False,
              progress: bool = True) -> RunStore:
    """Generate, score and store every missing trial of ``spec`` in run directory ``out``."""
    spec = spec.model_copy(update={"data_sha256": data_sha256()}).check()
    if backend is None:
        from tamperbench.models import load_backend

        backend = load_backend(spec.model, device=spec.device, dtype=spec.dtype, batch_size=spec.batch_size)
    store = RunStore.open(out, spec, new=new)
    store.ensure_table(TABLE, QuoteTrial)
    pid = store.put_provenance(backend.provenance)
    done = store.keys(TABLE)
    todo = [t for t in build_trials(spec) if t.key not in done]
    # Similar prompt lengths share a batch (less padding); repeats stay apart (one seed each).
    todo.sort(key=lambda t: (t.repeat, len(t.prompt)))
    bs = max(1, int(backend.max_batch_size))
    with _progress() if progress else _NullProgress() as prog:
        task = prog.add_task(f"{spec.preset} ({len(done)} stored)", total=len(todo))
        for repeat in range(spec.repeats):
            group = [t for t in todo if t.repeat == repeat]
            for start in range(0, len(group), bs):
                chunk = group[start:start + bs]
                gens = backend.generate_chat([[{"role": "user", "content": t.prompt}] for t in chunk],
                                             max_new_tokens=spec.max_new_tokens, temperature=spec.temperature,
                                             seed=spec.seed + repeat, progress=False)
                store.write(TABLE, [_record(spec, pid, t, g, i, len(chunk)) for i, (t, g) in
                                    enumerate(zip(chunk, gens))])
                prog.update(task, advance=len(chunk))
    return store


def run(spec: QuoteRunSpec, out: Path, *, new: bool = False, backend=None, progress: bool = True) -> None:
    """The registry's runner (``tamperbench run SPEC.json``): run or resume, then close the store."""
    run_quote(spec, Path(out), backend=backend, new=new, progress=progress).close()


def _record(spec: QuoteRunSpec, pid: str, t: Trial, g, index: int, batch: int) -> QuoteTrial:
    verdict = score_response(t.item, g.text)
    return QuoteTrial(
        key=t.key, provenance_id=pid, model=spec.model, preset=spec.preset, item_id=t.item.id,
        doc_id=t.item.doc_id, arm=t.arm, repeat=t.repeat, dirty=t.item.dirty,
        planted_kind=t.item.planted.kind if t.item.planted else None, gold=t.item.gold,
        instruction=t.item.instruction(t.arm), prompt_text=g.prompt_text, n_prompt_tokens=len(g.prompt_ids),
        response=g.text, n_new_tokens=len(g.token_ids), finish_reason=g.finish_reason,
        temperature=spec.temperature, seed=spec.seed + t.repeat, sample_index=index,
        max_new_tokens=spec.max_new_tokens, batch_size=batch, answer=verdict.answer,
        category=verdict.category, sub_label=verdict.sub_label, evidence=verdict.evidence)


class _NullProgress:
    """Stand-in when progress output is off (tests, piped output)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, *a, **k):
        return 0

    def update(self, *a, **k):
        pass


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
