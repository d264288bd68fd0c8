"""Run (or resume) an OWMI spec into a run directory through the run driver (:mod:`tamperbench.runs.driver`):
its suite definition (``SUITE``), its worker (importable by name, so another process rebuilds it) and
``run``, which ``owmi run`` and the known-positive check call.

Why keys computed before any compute: every record's key is the hash of its design coordinates
(cell, item, seed, track, probe, scope, condition, observer), known from the spec alone, so a
resumed run skips a unit whose records are all stored without loading anything for it. The
impact-matched norm is calibrated once per cell (over all its items and seeds) and stored
(``owmi_calibration``) before any record of the cell, so a resumed cell reuses it rather than
re-calibrating over a different subset.

Why context frames (``OwmiSpec.frames``): Track C's contexts carry no introspection system prompt
(by default), so its task turn -- and with it the baseline answer, the treatment's divergence and
the impact-matched norm -- differs from the other tracks'. A cell's units are prepared, calibrated
and run once per frame; record keys are unchanged, and every record names its ``system_prompt``.
A run directory written before that column existed is refused (its Track C records were made
under the introspection prompt), so old and new records never share a table.

The walk of one run, in the driver's order: ``validate`` (every check that reads configs, before
any model loads) -> per model: load it, its loaded checks (:func:`_check`), its observers and its
engine, picked once (:func:`_context`) -> open the store (an older table is refused) -> the plan
(owmi/run/plan.py: one work unit per cell and context frame) -> :func:`work` per unit: prepare the
units, impact-match, then each unit's records batch by batch (``execute.records``), each batch
committed by the driver -> the tier-3 classifier's rows (:func:`_finish`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.owmi.protocol.records import CALIBRATION_TABLE, RUNS_TABLE, OwmiCalibration, OwmiRun
from tamperbench.owmi.run.context import RunContext, RunReport
from tamperbench.owmi.run.plan import FrameWork, calibration_key, frame_row_tokens, plan_frames, run_plan
from tamperbench.owmi.run.spec import OwmiSpec
from tamperbench.owmi.run.validate import validate
from tamperbench.runs.driver import Executor, RunResult, SuiteDef
from tamperbench.runs.driver import run as drive
from tamperbench.runs.units import Finished, WorkUnit
from tamperbench.store import RunStore

__all__ = ["SUITE", "RunReport", "run", "setup_worker", "work"]


@dataclass
class OwmiContext:
    """What a worker holds: the spec, the loaded model under test, its tier-2 observers and its engine."""

    spec: OwmiSpec
    backend: Any
    observers: list[tuple[str, Any]]
    engine: Any  # engine.base.Engine: batched or reference, picked once from the model


def _preflight(spec: OwmiSpec) -> None:
    """Every check that needs no loaded model (owmi/run/validate.py), before the run directory is touched."""
    validate(spec)


def _load(spec: OwmiSpec, model: str) -> Any:
    from tamperbench.models import load_backend

    return load_backend(model, device=spec.device, dtype=spec.dtype)


def _check(spec: OwmiSpec, backend: Any, model: str) -> None:
    """The checks that need the loaded model (choice options, objects, positions), before any forward."""
    from tamperbench.owmi.run.keys import load_items
    from tamperbench.owmi.run.validate import ValidatedRun

    items = {b: load_items(b, spec.items_per_benchmark) for b in spec.benchmarks}
    ValidatedRun(spec, items).check_loaded(model, backend)


def _context(spec: OwmiSpec, backend: Any, console: Console | None = None) -> OwmiContext:
    """The worker's context on the loaded model: its observers loaded and checked, its engine."""
    from tamperbench.owmi.engine import engine_for
    from tamperbench.owmi.run.validate import ValidatedRun

    observers = [(o, _load(spec, o)) for o in spec.observer_models]
    ValidatedRun(spec, {}).check_observers(backend, observers)
    return OwmiContext(spec, backend, observers, engine_for(backend, spec, observers))


def setup_worker(config: tuple[OwmiSpec, str]) -> OwmiContext:
    """Worker setup in another process (``config``: the spec and the model under test)."""
    spec, model = config
    backend = _load(spec, model)
    _check(spec, backend, model)
    return _context(spec, backend)


def work(ctx: OwmiContext, units: list[WorkUnit], live: Callable[[dict], None] | None = None) -> Iterator[list[Finished]]:
    """Each (cell, frame) unit: one ``Finished`` list per commit group -- the new calibration row
    first, then each batch of records as the engine finishes it -- with ``stats={"tokens": n}``
    (answer tokens, as owmi/run/plan.py's row-token model counts them). An (item, seed) unit's end is
    a ``Finished`` without records carrying ``units: 1`` and its task answers' tokens (the bar)."""
    for unit in units:
        yield from _run_frame(ctx, unit.key, unit.payload)


def _run_frame(octx: OwmiContext, key: str, w: FrameWork) -> Iterator[list[Finished]]:
    """The units of one cell in one context frame: prepare, impact-match over the frame's units,
    then each unit's missing records batch by batch."""
    from tamperbench.owmi.engine.unit import MODEL_CONDITIONS
    from tamperbench.owmi.run.execute import records

    eng = octx.engine
    ctx = RunContext(spec=octx.spec, model=w.model, backend=octx.backend, observers=octx.observers, engine=eng,
                     store=None, provenance_id=w.provenance_id)
    units = [(eng.prepare(c, it, idx, seed, w.frame), missing) for c, it, idx, seed, missing in w.todo]
    if "random_matched" in ctx.spec.conditions:
        row = _calibration(ctx, w, [u for u, _ in units])
        if row is not None:
            yield [Finished(key, {CALIBRATION_TABLE: [row]}, {"tokens": 0})]
    for unit, missing in units:
        eng.fill_effects(unit, {d["condition"] for _, _, d in missing})
        answered: list[int] = []
        for recs in records(ctx, unit, missing, on_tokens=answered.append):
            yield [Finished(key, {RUNS_TABLE: list(recs)}, {"tokens": answered.pop() if answered else 0})]
        # the frame's task answers, one per model condition (as owmi/run/plan.py unit_row_tokens counts them)
        task = sum(len(unit.gens[c][1]) for c in MODEL_CONDITIONS if c in unit.gens)
        eng.release(unit)
        yield [Finished(key, {}, {"tokens": task, "units": 1})]


def _calibration(ctx: RunContext, w: FrameWork, units: list) -> OwmiCalibration | None:
    """One eta per cell and frame, over every (item, seed) of the cell, stored before any of the
    cell's records: a resumed cell finds it (``w.calibration``, read by the plan) and reuses it
    whatever subset is left to run. The neutral frame (Track C) is matched on its own task contexts.
    Returns the new row to store (None when one was stored)."""
    if w.calibration is not None:
        for u in units:
            u.eta, u.match = w.calibration["eta"], (w.calibration["target_js"], w.calibration["achieved_js"])
        return None
    eng = ctx.engine
    ready = {(u.item.id, u.seed) for u in units}  # normally all of them (no record precedes this row)
    extra = [eng.prepare(c, it, idx, seed, w.frame) for c, it, idx, seed in w.everyone if (it.id, seed) not in ready]
    eta, target, achieved, trace = eng.calibrate(units + extra)
    for u in extra:
        eng.release(u)
    items = sorted({it.id for _, it, _, _ in w.everyone})
    b, site, operator, dose = w.cell
    return OwmiCalibration(
        key=calibration_key(ctx.spec, w.model, w.cell, w.everyone, w.frame), provenance_id=eng.b.provenance_id,
        model=w.model, site=site, operator=operator, dose=dose, seed=-1, item_id=",".join(items), target_js=target,
        achieved_js=achieved, eta=eta, iterations=len(trace), trace=trace, path=eng.calibration_path(),
        system_prompt=eng.frame_system(w.frame))


def _refuse_older_table(spec: OwmiSpec, store: RunStore) -> None:
    """A run whose table predates a column of its shape was written by an older tamperbench; its
    records may differ from what this one writes for the same keys (Track C's context lost the
    introspection system prompt when ``system_prompt`` was added), so resuming it would mix the two
    in one table. One line, before any table is created or record computed."""
    for table, shape in SUITE.tables:
        if not store.has_table(table):
            continue
        have = {c for (c,) in store.con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]).fetchall()}
        lacking = sorted(set(shape.model_fields) - have)
        if lacking:
            raise UserError(f"{store.run_dir}: table {table} was written by an older tamperbench (no column "
                            f"{', '.join(lacking)}); its records are not comparable with this version's: use "
                            "another --out or pass --new to replace it")


def _refuse_older_run(spec: OwmiSpec, out: str | Path) -> None:
    """``owmi run`` refuses an older run directory before any model loads (the driver's ``on_open``
    refuses it too, once the store opens, for ``tamperbench run``); a directory that cannot be read
    here is left to the driver's own checks."""
    from tamperbench.estimate import open_read_only

    try:
        store = open_read_only(out)
    except Exception:  # not a readable run directory: the driver says why, in one line
        return
    try:
        if isinstance(store, RunStore):
            _refuse_older_table(spec, store)
    finally:
        store.close()


def _finish(spec: OwmiSpec, store: RunStore, result: RunResult) -> None:
    """The tier-3 observer classifier's rows, fitted on the stored records (``observer_classifier``)."""
    if spec.observer_classifier:
        from tamperbench.owmi.score.observer_classifier import classifier_rows

        result.written[RUNS_TABLE] += store.write(RUNS_TABLE, classifier_rows(store.rows(RUNS_TABLE)))


SUITE = SuiteDef(
    name="owmi", spec=OwmiSpec, tables=((RUNS_TABLE, OwmiRun), (CALIBRATION_TABLE, OwmiCalibration)),
    worker=("tamperbench.owmi.run.runner:setup_worker", "tamperbench.owmi.run.runner:work"),
    plan=plan_frames, needs=("HookBackend", "ScoringBackend"), models=lambda s: s.models, load=_load,
    preflight=_preflight, check=_check, context=_context, config=lambda s, m: (s, m),
    on_open=_refuse_older_table, finish=_finish, row_tokens=frame_row_tokens, estimate=run_plan,
    unit="unit", weight=lambda f: int(f.stats.get("units", 0)))


def _stored_units(spec: OwmiSpec, store: RunStore) -> tuple[int, int]:
    """(units, units whose records are all stored) of every model: the (model, cell, item, seed)
    counts ``owmi run`` prints, read when the store opens, before anything is written."""
    from tamperbench.owmi.run.keys import load_items
    from tamperbench.owmi.run.plan import pending_units

    items = {b: load_items(b, spec.items_per_benchmark) for b in spec.benchmarks}
    have = store.keys(RUNS_TABLE)
    units = [not pending for _, pending, _ in pending_units(spec, items, have)]
    return len(units), sum(units)


def run(spec: OwmiSpec, out: str | Path, *, new: bool = False, console: Console | None = None,
        executor: Executor | None = None) -> RunReport:
    """Run (or resume) ``spec`` into ``out`` through the run driver; returns what was done."""
    t0, counted = time.perf_counter(), {}
    if not new:
        _refuse_older_run(spec, out)

    def on_open(s: OwmiSpec, store: RunStore) -> None:
        _refuse_older_table(s, store)
        counted["units"], counted["skipped"] = _stored_units(s, store)

    res = drive(dataclasses.replace(SUITE, on_open=on_open), spec, out, new=new, console=console, executor=executor)
    return RunReport(written=res.written[RUNS_TABLE], skipped_units=counted.get("skipped", 0),
                     units=counted.get("units", 0), seconds=time.perf_counter() - t0, row_tokens=res.row_tokens,
                     tokens=res.tokens)
