"""The run's work, in the order it happens: :func:`work` takes the plan's units (one cell in one
context frame each); per unit the engine prepares each (item, seed) and impact-matches the cell
(:func:`prepare`), computes the teacher-forced effects, then :func:`records` computes and builds
the unit's records batch by batch; :func:`finish` adds the tier-3 classifier's rows after the run.

One unit's records, batch by batch: the engine says which batches a track has, this writes them.

Why records are committed per *batch* (group), not per unit: a unit (cell, item, seed) runs for
minutes (every track, probe, scope, condition and observer). Its records are written as soon as the
batch that computes them finishes, each batch in one transaction, so a run killed at any moment
loses at most the batch in flight. Which batches there are is the engine's (``Engine.group``): the
batched engine computes one track's model conditions x scopes x probe families as one batch and one
observer tier of a track as another; the reference engine a delayed or visible track per condition
and the observer per probe family. On resume a batch whose keys are all stored is not recomputed; a
batch is computed exactly as in an uninterrupted run (same batch rows), so resumed records equal
the ones an uninterrupted run writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from tamperbench.owmi.protocol.records import CALIBRATION_TABLE, RUNS_TABLE, OwmiCalibration, OwmiRun
from tamperbench.owmi.run.context import OwmiContext, RunContext
from tamperbench.owmi.run.plan import FrameWork
from tamperbench.owmi.run.record import build, result_of
from tamperbench.runs.units import Finished, WorkUnit

__all__ = ["finish", "prepare", "records", "unit_records", "work"]


def work(octx: OwmiContext, units: list[WorkUnit], live: Callable[[dict], None] | None = None) -> Iterator[list[Finished]]:
    """Each (cell, frame) unit: one ``Finished`` list per commit group -- the new calibration row
    first, then each batch of records as the engine finishes it -- with ``stats={"tokens": n}``
    (answer tokens, as owmi/run/plan.py's row-token model counts them). An (item, seed) unit's end is
    a ``Finished`` without records carrying ``units: 1`` and its task answers' tokens (the bar)."""
    from tamperbench.owmi.engine.unit import MODEL_CONDITIONS

    eng = octx.engine
    for wu in units:
        key, w = wu.key, wu.payload
        ctx = RunContext(spec=octx.spec, model=w.model, backend=octx.backend, observers=octx.observers, engine=eng,
                         store=None, provenance_id=w.provenance_id)
        prepared, row = prepare(ctx, w)
        if row is not None:
            yield [Finished(key, {CALIBRATION_TABLE: [row]}, {"tokens": 0})]
        for unit, missing in prepared:
            answered: list[int] = []
            for recs in records(ctx, unit, missing, on_tokens=answered.append):
                yield [Finished(key, {RUNS_TABLE: list(recs)}, {"tokens": answered.pop() if answered else 0})]
            # the frame's task answers, one per model condition (as owmi/run/plan.py unit_row_tokens counts them)
            task = sum(len(unit.gens[c][1]) for c in MODEL_CONDITIONS if c in unit.gens)
            eng.release(unit)
            yield [Finished(key, {}, {"tokens": task, "units": 1})]


def prepare(ctx: RunContext, w: FrameWork) -> tuple[list, OwmiCalibration | None]:
    """The frame's pending (item, seed) units prepared (``(unit, unstored keys)``), impact-matched
    under ``random_matched``, and the calibration row to store first (None when there is none to store).

    One eta per cell and frame, over every (item, seed) of the cell, stored before any of the cell's
    records: a resumed cell finds it (``w.calibration``, read by the plan) and reuses it whatever
    subset is left to run. The neutral frame (Track C) is matched on its own task contexts."""
    eng = ctx.engine
    prepared = [(eng.prepare(c, it, idx, seed, w.frame), missing) for c, it, idx, seed, missing in w.todo]
    if "random_matched" not in ctx.spec.conditions:
        return prepared, None
    units = [u for u, _ in prepared]
    if w.calibration is not None:
        for u in units:
            u.eta, u.match = w.calibration["eta"], (w.calibration["target_js"], w.calibration["achieved_js"])
        return prepared, None
    ready = {(u.item.id, u.seed) for u in units}  # normally all of them (no record precedes this row)
    extra = [eng.prepare(c, it, idx, seed, w.frame) for c, it, idx, seed in w.everyone if (it.id, seed) not in ready]
    eta, target, achieved, trace = eng.calibrate(units + extra)
    for u in extra:
        eng.release(u)
    items = sorted({it.id for _, it, _, _ in w.everyone})
    b, site, operator, dose = w.cell
    system = eng.frame_system(w.frame)
    return prepared, OwmiCalibration(
        key=w.calibration_key, provenance_id=eng.b.provenance_id,
        model=w.model, site=site, operator=operator, dose=dose, seed=-1, item_id=",".join(items), target_js=target,
        achieved_js=achieved, eta=eta, iterations=len(trace), trace=trace, path=eng.calibration_path(),
        system_prompt=system)


def records(ctx, unit, keys: list, on_tokens: Callable[[int], None] | None = None) -> Iterator[list[OwmiRun]]:
    """The records of ``keys`` (one prepared unit's unstored keys): its teacher-forced effects first,
    then one list per batch as soon as the batch finishes; batches with no key in ``keys`` are not
    computed. ``on_tokens`` gets each batch's answer tokens, one answer per record (the bar's ETA)."""
    for group_keys, res in _batches(ctx, unit, keys):
        if on_tokens is not None:
            on_tokens(sum(len(result_of(res, d)[3][0]) for _, _, d in group_keys))
        yield [build(ctx, unit, k, res) for k in group_keys]


def _batches(ctx, unit, keys: list) -> Iterator[tuple[list, dict]]:
    """(the keys of one batch, its results by record coordinates), batch by batch, in the engine's
    order: the unit's effects, then per track its model-condition batches and its observer tiers."""
    eng, spec = ctx.engine, ctx.spec
    eng.fill_effects(unit, {d["condition"] for _, _, d in keys})
    want: dict[tuple, list] = {}
    for k in keys:
        want.setdefault(eng.group(k[2]), []).append(k)
    tiers = [(1, unit.cell.model, ctx.backend), *[(2, o, ob) for o, ob in ctx.observers]]
    for track in spec.tracks:
        for group, compute in eng.probe_batches(unit, track):
            if group in want:
                t = time.perf_counter()
                got = compute()
                dt = (time.perf_counter() - t) / max(len(got), 1)
                yield want[group], {(track, fam, scope, c, None): (*v, dt) for (c, fam, scope), v in got.items()}
        if "observer" not in spec.conditions:
            continue
        for tier, name, backend in tiers:
            for group, compute in eng.observer_batches(unit, track, tier, backend):
                if group in want:
                    t = time.perf_counter()
                    obs = compute()
                    dt = (time.perf_counter() - t) / max(len(obs), 1)
                    yield want[group], {(track, fam, scope, "observer", tier): (text, ids, [], resp, dt, probe3, name)
                                        for fam, (text, ids, probe3, resp) in obs.items() for scope in spec.scopes}


def unit_records(engine, unit, keys: list, *, provenance_id: str) -> list[OwmiRun]:
    """One prepared unit's records of ``keys`` outside a run directory (the engine tests and
    benchmarks): its teacher-forced effects, then every batch, as ``owmi run`` computes them."""
    ctx = RunContext(spec=engine.spec, model=unit.cell.model, backend=engine.b, observers=list(engine.observers),
                     engine=engine, store=None, provenance_id=provenance_id)
    return [r for batch in records(ctx, unit, keys) for r in batch]


def finish(spec, store, result) -> None:
    """The driver's ``finish``: the tier-3 observer classifier's rows, fitted on the stored records
    (``observer_classifier``)."""
    if spec.observer_classifier:
        from tamperbench.owmi.score.observer_classifier import classifier_rows

        result.written[RUNS_TABLE] += store.write(RUNS_TABLE, classifier_rows(store.rows(RUNS_TABLE)))
