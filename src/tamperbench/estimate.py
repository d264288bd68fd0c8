"""Plans and ETAs: what a run will decode, what is stored already, and how long the rest will take.

Why: ``--preset paper`` is 10,100 trials x 256 tokens; on a 2-core CPU that is hours, on a GPU
minutes. A user should learn that before committing the machine, and the progress bar should
count down with the same arithmetic instead of rich's rate guess, which swings with batch
refills.

The cost model, kept deliberately small so it can be read and checked:

* a prefill token costs ``1 / prefill_tps`` seconds (prefill is compute-bound: one number);
* a decoding step of ``b`` rows costs ``step_a + step_b * b`` seconds (the fixed part is weights
  streaming and Python, the per-row part is the rows' matmuls), fitted from two batch sizes;
* a run of ``T`` row-tokens at batch ``B`` takes ``ceil(T / B)`` steps.

``calibrate`` measures the three numbers in a few forward passes on this machine with the loaded
model (``--dry-run`` prints them). Token counts are upper bounds: every answer is assumed to run
to its budget (EOS ends many earlier), so the ETA is an upper bound too and says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

__all__ = ["Calibration", "EtaTracker", "Plan", "calibrate", "dry_run", "format_seconds", "owmi_pending",
           "owmi_plan", "owmi_row_tokens", "owmi_unit_row_tokens", "print_plan", "quote_plan", "quote_row_tokens",
           "sleight_plan", "sleight_row_tokens"]


@dataclass(frozen=True)
class Calibration:
    """Measured on this machine with the loaded model (seconds, tokens/s)."""

    prefill_tps: float
    step_a: float  # seconds per decoding step, fixed part
    step_b: float  # seconds per decoding step, per row
    seconds: float  # calibration wall time
    batch: int  # the largest batch measured
    low: int = 1  # the smaller batch measured: the per-row cost is the slope between ``low`` and ``batch``

    def step_seconds(self, rows: int) -> float:
        return self.step_a + self.step_b * max(1, rows)

    def decode_seconds(self, row_tokens: int, batch: int) -> float:
        """Seconds to decode ``row_tokens`` tokens spread over rows of a ``batch``-row decoder."""
        if row_tokens <= 0:
            return 0.0
        steps = math.ceil(row_tokens / max(1, batch))
        return steps * self.step_seconds(min(batch, row_tokens))

    def seconds_for(self, prefill_tokens: int, row_tokens: int, batch: int) -> float:
        return prefill_tokens / self.prefill_tps + self.decode_seconds(row_tokens, batch)


def calibrate(backend, *, batch: int | None = None, prompt_tokens: int = 128, context: int | None = None,
              steps: int = 3, probe_batch: int = 32) -> Calibration:
    """A few forward passes (seconds on an idle CPU): one prefill of a ``prompt_tokens``-token row
    (``context`` tokens when larger: the mean columns the run's decoding steps attend to), forked
    to 4 rows and then ``min(batch, probe_batch)`` rows, ``steps`` decoding steps timed at each; the
    per-row cost is the slope between the two, extrapolated linearly to the run's batch. Not from
    a 1-row step: the decoder runs one row through another kernel (unpacked linears,
    models/decoding/packed_linear.py) that costs about what 4 packed rows do, so a 1-vs-16 slope
    over a 16-token context came out near zero and a 128-row ``--preset paper`` plan promised
    several times its real speed. Runs of at most 4 rows fit from 1 row. Nothing is stored anywhere."""
    hi = max(2, min(int(batch or backend.max_batch_size), probe_batch))
    lo = 1 if hi <= 4 else 4
    n = max(prompt_tokens, int(context or 0))
    ids = backend.encode("The quick brown fox jumps over the lazy dog. " * (n // 8 + 1))[:n]
    t_start = time.perf_counter()
    dec = backend.step_decoder(capacity=hi)
    t0 = time.perf_counter()
    [rid] = dec.add_rows([ids])
    t_pre = time.perf_counter() - t0

    def timed_steps(rows: int) -> float:
        live = len(dec.live_rows())
        if rows > live:
            dec.fork(rid, rows - live)
        dec.step()  # the first step at a new size pays allocation
        t1 = time.perf_counter()
        for _ in range(steps):
            dec.step()
        return (time.perf_counter() - t1) / steps

    s_lo, s_hi = timed_steps(lo), timed_steps(hi)
    slope = max((s_hi - s_lo) / (hi - lo), 0.0)
    return Calibration(prefill_tps=len(ids) / max(t_pre, 1e-9), step_a=max(s_lo - slope * lo, 1e-6), step_b=slope,
                       seconds=time.perf_counter() - t_start, batch=hi, low=lo)


@dataclass
class Plan:
    """What a run will do. ``row_tokens``: tokens the decoder will emit (upper bound);
    ``prefill_tokens``: prompt tokens it will feed; ``units``: trials (or judgments, probes)."""

    suite: str
    units: int  # to do
    stored: int  # already in the run directory
    row_tokens: int
    prefill_tokens: int
    batch: int
    unit_name: str = "trials"
    notes: list[str] = field(default_factory=list)
    eta_seconds: float | None = None
    context: int | None = None  # mean columns a decoding step attends to (calibrated there)

    def with_eta(self, cal: Calibration) -> Plan:
        self.eta_seconds = cal.seconds_for(self.prefill_tokens, self.row_tokens, self.batch)
        return self

    def as_dict(self) -> dict:
        return asdict(self)


def format_seconds(s: float) -> str:
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h} h {m:02d} min" if h else (f"{m} min {sec:02d} s" if m else f"{sec} s")


def print_plan(plan: Plan, cal: Calibration | None, echo: Callable[[str], None] = print) -> None:
    """The ``--dry-run`` report (plain lines, so scripts can grep them)."""
    total = plan.units + plan.stored
    echo(f"plan: {plan.suite}: {total} {plan.unit_name} in the spec, {plan.stored} already stored, "
         f"{plan.units} to run")
    echo(f"tokens to decode: at most {plan.row_tokens:,} (every answer to its budget); "
         f"prompt tokens to prefill: {plan.prefill_tokens:,}; batch {plan.batch}")
    for note in plan.notes:
        echo(f"note: {note}")
    if cal is not None:
        echo(f"calibration ({cal.seconds:.1f} s on this machine): prefill {cal.prefill_tps:.0f} tokens/s, "
             f"a decoding step {cal.step_a * 1000:.0f} ms + {cal.step_b * 1000:.1f} ms per row "
             f"(fitted between {cal.low} and {cal.batch} rows; batch {plan.batch}: {plan.batch / cal.step_seconds(plan.batch):.0f} tokens/s)")
    if plan.eta_seconds is not None:
        echo(f"ETA: at most {format_seconds(plan.eta_seconds)} (upper bound from the calibration; "
             f"answers that stop early take less)")
    echo("dry run: nothing was decoded or stored")


class EtaTracker:
    """The progress bar's remaining time, from the plan's token count and the cost model.

    Until ``warmup`` seconds of decoding have passed the calibrated rate is used; after that, the
    rate this run has actually achieved (tokens/s so far), since load on a shared machine moves
    it. Remaining time = remaining row-tokens / rate (an upper bound, like the plan)."""

    def __init__(self, row_tokens: int, cal: Calibration | None = None, batch: int = 1, warmup: float = 10.0):
        self.row_tokens, self.cal, self.batch, self.warmup = row_tokens, cal, batch, warmup

    def remaining(self, tokens_done: int, seconds: float) -> float | None:
        left = max(self.row_tokens - tokens_done, 0)
        if seconds >= self.warmup and tokens_done > 0:
            return left / (tokens_done / seconds)
        if self.cal is not None:
            return self.cal.decode_seconds(left, self.batch)
        return None

    def text(self, tokens_done: int, seconds: float) -> str:
        r = self.remaining(tokens_done, seconds)
        return "eta -" if r is None else f"eta <= {format_seconds(r)}"

    def tokens_text(self, tokens_done: int) -> str:
        """``decoded/bound``: the bar shows the total its ETA counts down from (the plan's number)."""
        return f"{tokens_done:,}/{self.row_tokens:,}"


class _NoStore:
    """Stands in for a run directory that does not exist yet: nothing stored."""

    def keys(self, table: str) -> set[str]:
        return set()

    def has_table(self, table: str) -> bool:
        return False

    def rows(self, table: str, where: str = "", params: list | None = None) -> list[dict]:
        return []

    def close(self) -> None:
        pass


def _open_read_only(out):
    """The run directory's store, read-only, or an empty stand-in; a dry run never creates it."""
    from pathlib import Path

    from tamperbench.store import RunStore
    from tamperbench.store.run_store import DB_FILE, SPEC_FILE

    out = Path(out)
    if (out / SPEC_FILE).is_file() and (out / DB_FILE).is_file():
        return RunStore.open_existing(out, read_only=True)
    return _NoStore()


def sleight_row_tokens(units, budget: int) -> int:
    """Upper bound on the swap engine's row-tokens for pending question units: each question's
    prefix row (the clean answer) and each pending trial run to the budget. The runner's progress
    bar counts down from the same number."""
    return sum(budget * (len(u.payload.substitutions) + 1) for u in units)


def quote_row_tokens(units, budget: int) -> int:
    """Upper bound on the decoder's row-tokens for pending Exact Words trials: every answer to its
    budget. ``quote_plan`` and the runner's progress bar both count with this."""
    return len(units) * budget


def sleight_plan(spec, out, backend) -> Plan:
    """Pending Sleight of Word work of ``spec`` against run directory ``out`` (nothing written).

    Row-tokens: per pending question its prefix row (the clean answer) to the budget, plus every
    pending trial to the budget; matched-branch rows of later swaps (``window`` tokens each) are
    not counted. Prefill: one prompt per pending question (trials fork from it)."""
    from tamperbench.sleight.runner import plan as sleight_pending

    store = _open_read_only(out)
    try:
        units, total, skipped = sleight_pending(spec, store, backend.provenance_id)
    finally:
        store.close()
    msgs = {qid: [{"role": "user", "content": q}] for qid, q in spec.questions}
    n_trials = sum(len(u.payload.substitutions) for u in units)
    row_tokens = sleight_row_tokens(units, spec.max_new_tokens)
    prefill = sum(len(backend.chat_ids(msgs[u.payload.question_id])) for u in units)
    batch = _sleight_slots(spec, units, msgs, backend)
    notes = [f"{len(spec.questions)} questions x {len(spec.substitutions)} substitutions x "
             f"{spec.max_new_tokens} tokens; {len(units)} questions pending",
             f"matched-branch rows ({spec.window} tokens at each later swap) are not counted"]
    context = prefill // max(len(units), 1) + spec.max_new_tokens // 2
    return Plan("sleight", n_trials, skipped, row_tokens, prefill, batch, notes=notes, context=context)


def _sleight_slots(spec, units, msgs, backend) -> int:
    """The rows the swap engine will decode at once: its own ``choose_slots`` over the pending
    questions (memory for the longest prompt + budget, the rows they fill, the device ceiling or
    ``--batch-size``); the spec's or load-time batch where there is no local model to size."""
    from tamperbench.models.protocols import StepBackend

    if not units or not isinstance(backend, StepBackend):  # the black-box engine: no slots to size
        return int(spec.batch_size or backend.max_batch_size)
    from tamperbench.sleight.engine import QuestionTask, choose_slots

    tasks = [QuestionTask(question_id=u.payload.question_id, prompt_ids=backend.chat_ids(msgs[u.payload.question_id]),
                          substitutions=list(u.payload.substitutions), need_clean=u.payload.need_clean) for u in units]
    return choose_slots(backend, tasks, max_new_tokens=spec.max_new_tokens, window=spec.window,
                        batch_size=spec.batch_size).rows


def quote_plan(spec, out, backend) -> Plan:
    """Pending Exact Words trials of ``spec`` against ``out``; prefill counts each shared prefix
    once per generation call, as ``generate_chat`` does (models/prefix_share.py). Under cascade
    attention ``generate_chat`` prefills a prefix tree (models/prefix_tree.py: the groups' common
    start once, each branch its members repeat once), so the plan counts the tree's tokens there
    and the one-level groups' elsewhere (the copy path, sliding-window models, remote backends)."""
    from tamperbench.models.decoding.cascade import cascade_mode
    from tamperbench.models.prefix_share import plan_groups, prefill_cost
    from tamperbench.models.prefix_tree import tree_prefill_tokens
    from tamperbench.quote.runner import build_trials, call_size, data_sha256, generation_calls
    from tamperbench.quote.runner import plan as quote_pending

    spec = spec.model_copy(update={"data_sha256": data_sha256()})  # as run_quote does: keys depend on it
    store = _open_read_only(out)
    try:
        units = quote_pending(spec, store)
        total = len(build_trials(spec))
    finally:
        store.close()
    # the runner's own calls (quote/runner.py work): per repeat, cut by call_size/generation_calls
    bs, keep_documents, by_memory = call_size(backend, spec.batch_size)
    trials = [u.payload for u in units]
    calls = [call for repeat in sorted({t.repeat for t in trials})
             for call in generation_calls([t for t in trials if t.repeat == repeat], bs, keep_documents=keep_documents)]
    ids = {t.key: backend.chat_ids([{"role": "user", "content": t.prompt}]) for t in trials}
    model = getattr(backend, "model", None)
    cost = tree_prefill_tokens if model is not None and cascade_mode(model)[0] is not None else prefill_cost
    prefill = 0
    for call in calls:
        prompts = [ids[t.key] for t in call]
        prefill += cost(plan_groups(prompts), prompts)
    # rows decoded at once: a call's trials when memory decides (as far as it allows), else the cap
    batch = max(map(len, calls), default=1) if by_memory else min(bs, max(map(len, calls), default=1))
    notes = [f"prompt tokens without prefix reuse: {sum(map(len, ids.values())):,}",
             f"{len(calls)} generation call(s) of up to {bs} trials"
             + ("; each call's rows decoded at once as far as memory allows" if by_memory else "")]
    context = sum(map(len, ids.values())) // max(len(ids), 1) + spec.max_new_tokens // 2
    return Plan("quote", len(units), total - len(units), quote_row_tokens(units, spec.max_new_tokens), prefill, batch,
                notes=notes, context=context)


def dry_run(plan: Plan, backend, echo: Callable[[str], None] = print, *, calibration: bool = True) -> Plan:
    """Calibrate on this machine, attach the ETA and print the plan: what ``--dry-run`` does.
    Any suite (OWMI included) builds its ``Plan`` and calls this."""
    cal = calibrate(backend, batch=plan.batch, context=plan.context) if calibration and plan.units else None
    if cal is not None:
        plan.with_eta(cal)
    print_plan(plan, cal, echo)
    return plan


def owmi_unit_row_tokens(spec, pending: list[dict]) -> int:
    """Upper bound on the decoder's row-tokens for one (model, cell, item, seed) unit's pending
    records (their design fields, as ``owmi.runner.planned_keys`` gives them): each record's probe
    answer to its budget (Track C's reflection budget), plus the task answer under every model
    condition once per context frame those records run in (the runner prepares a unit once per
    frame, ``OwmiSpec.frames``). ``owmi_plan`` and the runner's progress bar count with this one
    function, so the bar counts down from the dry run's number."""
    from tamperbench.owmi.engine import MODEL_CONDITIONS

    if not pending:
        return 0
    frames = {spec.frame(d["track"]) for d in pending}
    task = len(frames) * sum(c in MODEL_CONDITIONS for c in spec.conditions) * spec.task_max_new_tokens
    return task + sum(spec.reflection_max_new_tokens if d["track"] == "C" else spec.probe_max_new_tokens
                      for d in pending)


def owmi_pending(spec, items: dict, have: set, models: list[str] | None = None):
    """(item, pending design fields, stored record count) of every unit, in the runner's plan order
    (owmi/runner.py), keyed with the runner's own ``planned_keys``: "stored" is what a resume skips."""
    from tamperbench.owmi.runner import _coords, planned_keys

    units = [(model, b, obj, op, it, seed) for model in (spec.models if models is None else models)
             for b in spec.benchmarks for obj in spec.objects for op in spec.operators for it in items[b]
             for seed in spec.seeds]
    for model, b, obj, op, it, seed in units:
        keys = planned_keys(spec, _coords(spec, model, b, obj, op, it, seed), spec.observer_models)
        pending = [d for k, _, d in keys if k not in have]
        yield it, pending, len(keys) - len(pending)


def owmi_row_tokens(spec, model: str, items: dict, have: set) -> int:
    """The decode bound of ``model``'s pending records against the stored keys ``have``: the total
    the runner's progress bar for that model counts down from (its part of ``owmi_plan``'s)."""
    return sum(owmi_unit_row_tokens(spec, pending) for _, pending, _ in owmi_pending(spec, items, have, [model]))


def owmi_plan(spec, out, backend) -> Plan:
    """Pending OWMI records of ``spec`` against run directory ``out`` (nothing written).

    A unit is one record (the store's key: model, cell, item, seed, track, probe family, scope,
    condition, observer tier), counted with the runner's own ``planned_keys``, so "already stored"
    is exactly what a resume skips. Row-tokens, an upper bound (``owmi_unit_row_tokens``): each
    pending record's probe answer to its budget, plus each pending unit's task answer under every
    model condition, per context frame. Prefill, without the runner's prefix sharing (an upper
    bound too): each pending record's item prompt and probe text. Impact-matching forwards and
    the teacher-forced effects are not counted (see the notes); the ETA is calibrated on the first
    model of the spec."""
    from tamperbench.owmi.probes import probe_text
    from tamperbench.owmi.records import RUNS_TABLE
    from tamperbench.owmi.runner import load_items

    items = {b: load_items(b, spec.items_per_benchmark) for b in spec.benchmarks}
    store = _open_read_only(out)
    try:
        have = store.keys(RUNS_TABLE) if store.has_table(RUNS_TABLE) else set()
    finally:
        store.close()
    n_layers = int(backend.model.config.num_hidden_layers)
    probe_ids: dict[tuple[str, str], int] = {}
    todo = stored = row_tokens = prefill = 0
    for it, pending, n_stored in owmi_pending(spec, items, have):
        stored += n_stored
        todo += len(pending)
        row_tokens += owmi_unit_row_tokens(spec, pending)
        for d in pending:
            key = (it.id, d["probe"])
            if key not in probe_ids:
                text = probe_text(d["probe"], person="first", n_layers=n_layers)
                probe_ids[key] = len(backend.chat_ids([{"role": "user", "content": f"{it.prompt_text()}\n\n{text}"}]))
            prefill += probe_ids[key]
    notes = [f"{len(spec.models)} model(s) x {len(spec.objects)} object(s) x {len(spec.operators)} operator(s) x "
             f"{sum(map(len, items.values()))} item(s) x {len(spec.seeds)} seed(s); one record per track, probe "
             f"family, scope, condition and observer tier",
             "prefill counts each record's item prompt and probe without prefix sharing (an upper bound); "
             "impact-matching bisections and teacher-forced effects are not counted",
             f"ETA calibrated on {spec.models[0]} only" if len(spec.models) > 1 else "",
             "the tier-3 classifier's observer rows (observer_classifier) are fitted after the run, not counted"
             if spec.observer_classifier else ""]
    return Plan("owmi", todo, stored, row_tokens, prefill, int(backend.max_batch_size), unit_name="records",
                notes=[n for n in notes if n])
