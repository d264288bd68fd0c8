"""Run (or resume) an OWMI spec into a run directory: plan units, execute, write records.

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

The walk of one run: :func:`validate` (every check, before any compute) -> per model: load it,
its loaded checks, pick its engine once (``engine_for``) and build its :class:`RunContext` ->
per cell and context frame (:func:`_run_frame`): prepare the units, impact-match, then each unit's
records batch by batch (``execute.records``, committed per batch).
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.owmi.engine.unit import MODEL_CONDITIONS, Cell
from tamperbench.owmi.protocol.records import CALIBRATION_TABLE, RUNS_TABLE, OwmiCalibration, OwmiRun
from tamperbench.owmi.run.context import RunContext, RunReport
from tamperbench.owmi.run.keys import planned_keys, unit_coords
from tamperbench.owmi.run.spec import OwmiSpec
from tamperbench.owmi.run.validate import validate
from tamperbench.store import RunStore, trial_key

__all__ = ["RunReport", "run"]


def run(spec: OwmiSpec, out: str | Path, *, new: bool = False, console: Console | None = None) -> RunReport:
    from tamperbench.models import load_backend
    from tamperbench.owmi.engine import engine_for
    from tamperbench.owmi.run.plan import pending_units
    from tamperbench.progress import ETA_FIELDS, countdown as bar_countdown, progress_bar

    console = console or Console(stderr=True)
    rep, t0 = RunReport(), time.perf_counter()
    checked = validate(spec)  # every model's objects, from its config: a bad second model is refused now
    items = checked.items
    with RunStore.open(out, spec, new=new) as store:
        for table, shape in ((RUNS_TABLE, OwmiRun), (CALIBRATION_TABLE, OwmiCalibration)):
            _refuse_older_table(store, table, shape)
            store.ensure_table(table, shape)
        have = store.keys(RUNS_TABLE)
        for model in spec.models:
            backend = load_backend(model, device=spec.device, dtype=spec.dtype)
            checked.check_loaded(model, backend)
            observers = [(o, load_backend(o, device=spec.device, dtype=spec.dtype)) for o in spec.observer_models]
            checked.check_observers(backend, observers)
            plan = [(b, obj, op, idx, it, seed) for b in spec.benchmarks for obj in spec.objects for op in spec.operators
                    for idx, it in enumerate(items[b]) for seed in spec.seeds]
            rep.units += len(plan)
            frames = spec.frames()
            pending = [p for _, p, _ in pending_units(spec, items, have, [model])]
            countdown = bar_countdown("owmi", spec, pending)  # the dry run's bound for this model (registry row_tokens)
            rep.row_tokens += countdown.tracker.row_tokens
            with progress_bar("owmi", "{task.fields[what]}", *ETA_FIELDS, unit="unit", console=console) as bar:
                task = bar.add_task(model, total=len(plan) * len(frames), what="", **countdown.fields())
                countdown.attach(bar, task)
                ctx = RunContext(spec=spec, model=model, backend=backend, observers=observers,
                                 engine=engine_for(backend, spec, observers), store=store,
                                 provenance_id=store.put_provenance(backend.provenance), have=have, report=rep,
                                 bar=bar, task=task, countdown=countdown)
                cells: dict[tuple, list] = {}
                for b, obj, op, idx, it, seed in plan:
                    cells.setdefault((b, obj.label, op.name, op.dose), []).append((b, obj, op, idx, it, seed))
                for key, members in cells.items():
                    unit_keys = [planned_keys(spec, unit_coords(spec, model, b, obj, op, it, seed), spec.observer_models)
                                 for b, obj, op, idx, it, seed in members]
                    rep.skipped_units += sum(all(k in have for k, _, _ in keys) for keys in unit_keys)
                    for frame, tracks in frames.items():  # a frame's units share a task context
                        todo, everyone = [], []
                        for (b, obj, op, idx, it, seed), keys in zip(members, unit_keys):
                            keys = [k for k in keys if k[2]["track"] in tracks]
                            everyone.append((Cell(model, b, obj, op), it, idx, seed, keys))
                            if all(k in have for k, _, _ in keys):
                                ctx.advance()
                            else:
                                todo.append(everyone[-1])
                        if todo:
                            _run_frame(ctx, key, frame, todo, everyone)
            rep.tokens += countdown.tokens
        if spec.observer_classifier:
            from tamperbench.owmi.score.observer_classifier import classifier_rows

            rep.written += store.write(RUNS_TABLE, classifier_rows(store.rows(RUNS_TABLE)))
    rep.seconds = time.perf_counter() - t0
    return rep


def _run_frame(ctx: RunContext, key: tuple, frame: str, todo: list, everyone: list) -> None:
    """The units of one cell in one context frame (``OwmiSpec.frame``): prepare, impact-match over
    the frame's units, then execute and write each unit's missing records batch by batch."""
    from tamperbench.owmi.run.execute import records

    eng = ctx.engine
    ctx.say(f"{key[1]} {key[2]}={key[3]}: baseline + treatment")
    units = [(eng.prepare(c, it, idx, seed, frame), keys) for c, it, idx, seed, keys in todo]
    if "random_matched" in ctx.spec.conditions:
        ctx.say(f"{key[1]}: impact matching")
        _calibration(ctx, key, [u for u, _ in units], everyone, frame)
    for unit, keys in units:
        ctx.say(f"{unit.item.id}")
        missing = [k for k in keys if k[0] not in ctx.have]
        eng.fill_effects(unit, {d["condition"] for _, _, d in missing})
        for recs in records(ctx, unit, missing, on_tokens=ctx.countdown.add):
            ctx.report.written += ctx.store.write(RUNS_TABLE, recs)
        # the frame's task answers, one per model condition (as owmi/run/plan.py unit_row_tokens counts them)
        ctx.countdown.add(sum(len(unit.gens[c][1]) for c in MODEL_CONDITIONS if c in unit.gens))
        eng.release(unit)
        ctx.advance()


def _calibration(ctx: RunContext, key: tuple, units: list, everyone: list, frame: str = "shared") -> None:
    """One eta per cell and frame, over every (item, seed) of the cell (``everyone``), stored before
    any of the cell's records: a resumed cell finds it and reuses it whatever subset is left to run.
    The neutral frame (Track C) is matched on its own task contexts; the shared frame's key is the
    one runs have always used."""
    eng, store = ctx.engine, ctx.store
    items = sorted({it.id for _, it, _, _, _ in everyone})
    coords = dict(model=ctx.model, cell=list(key), items=items, seeds=list(ctx.spec.seeds))
    cal_key = trial_key(coords if frame == "shared" else {**coords, "frame": frame})
    stored = store.rows(CALIBRATION_TABLE, "WHERE key = ?", [cal_key])
    if stored:
        for u in units:
            u.eta, u.match = stored[0]["eta"], (stored[0]["target_js"], stored[0]["achieved_js"])
        return
    ready = {(u.item.id, u.seed) for u in units}  # normally all of them (no record precedes this row)
    extra = [eng.prepare(c, it, idx, seed, frame) for c, it, idx, seed, _ in everyone if (it.id, seed) not in ready]
    eta, target, achieved, trace = eng.calibrate(units + extra)
    for u in extra:
        eng.release(u)
    store.write(CALIBRATION_TABLE, [OwmiCalibration(
        key=cal_key, provenance_id=eng.b.provenance_id, model=ctx.model, site=key[1], operator=key[2], dose=key[3],
        seed=-1, item_id=",".join(items), target_js=target, achieved_js=achieved,
        eta=eta, iterations=len(trace), trace=trace, path=eng.calibration_path(), system_prompt=eng.frame_system(frame))])


def _refuse_older_table(store, table: str, shape) -> None:
    """A run whose table predates a column of ``shape`` was written by an older tamperbench; its
    records may differ from what this one writes for the same keys (Track C's context lost the
    introspection system prompt when ``system_prompt`` was added), so resuming it would mix the two
    in one table. One line, before any model is loaded."""
    if not store.has_table(table):
        return
    have = {c for (c,) in store.con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]).fetchall()}
    lacking = sorted(set(shape.model_fields) - have)
    if lacking:
        raise UserError(f"{store.run_dir}: table {table} was written by an older tamperbench (no column "
                        f"{', '.join(lacking)}); its records are not comparable with this version's: use another "
                        "--out or pass --new to replace it")
