"""OWMI's plan and row-token model: the run driver's work units (:func:`plan_frames`, one per cell
and context frame), what ``--dry-run`` prints (:func:`run_plan`) and what the progress bar counts
down from (:func:`frame_row_tokens`).

Records are keyed with the runner's own ``planned_keys`` (owmi/run/keys.py) before any compute, so
"stored" is exactly what a resume skips."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tamperbench.estimate import Plan, open_read_only
from tamperbench.runs.driver import Planned
from tamperbench.runs.units import WorkUnit

__all__ = ["FrameWork", "frame_row_tokens", "pending_units", "plan_frames", "run_plan", "unit_row_tokens"]


@dataclass(frozen=True)
class FrameWork:
    """One work unit's payload: the pending (item, seed) units of one cell in one context frame
    (``OwmiSpec.frames``), all picklable. ``todo``: ``(Cell, item, item index, seed, unstored keys)``
    of the frame's units with a record to write; ``everyone``: ``(Cell, item, item index, seed)`` of
    every unit of the cell (impact matching runs over all of them); ``calibration``: the cell's
    stored impact-matching row in this frame (``eta``, ``target_js``, ``achieved_js``), or None."""

    model: str
    provenance_id: str
    cell: tuple  # (benchmark, object label, operator, dose)
    frame: str
    todo: list
    everyone: list
    calibration: dict | None = None


def calibration_key(spec, model: str, cell: tuple, everyone: list, frame: str) -> str:
    """One eta per cell and frame, over every (item, seed) of the cell; the shared frame's key is the
    one runs have always used, the neutral frame's (Track C) adds the frame."""
    from tamperbench.store import trial_key

    coords = dict(model=model, cell=list(cell), items=sorted({it.id for _, it, _, _ in everyone}),
                  seeds=list(spec.seeds))
    return trial_key(coords if frame == "shared" else {**coords, "frame": frame})


def plan_frames(spec, store, provenance_id: str, model: str) -> Planned:
    """``model``'s pending work against ``store``: one :class:`WorkUnit` per (cell, context frame)
    with a record to write, in the order the records have always been written (cells in spec order,
    frames in track order). The bar counts (item, seed) units per frame."""
    from tamperbench.owmi.engine.unit import Cell
    from tamperbench.owmi.protocol.records import CALIBRATION_TABLE, RUNS_TABLE
    from tamperbench.owmi.run.keys import load_items, planned_keys, unit_coords

    items = {b: load_items(b, spec.items_per_benchmark) for b in spec.benchmarks}
    have = store.keys(RUNS_TABLE)
    frames = spec.frames()
    cells: dict[tuple, list] = {}
    for b in spec.benchmarks:
        for obj in spec.objects:
            for op in spec.operators:
                for idx, it in enumerate(items[b]):
                    for seed in spec.seeds:
                        keys = planned_keys(spec, unit_coords(spec, model, b, obj, op, it, seed), spec.observer_models)
                        cells.setdefault((b, obj.label, op.name, op.dose), []).append(
                            (Cell(model, b, obj, op), it, idx, seed, keys))
    units, total, done = [], 0, 0
    for cell, members in cells.items():
        everyone = [(c, it, idx, seed) for c, it, idx, seed, _ in members]
        for frame, tracks in frames.items():  # a frame's units share a task context
            todo = []
            for c, it, idx, seed, keys in members:
                missing = [k for k in keys if k[2]["track"] in tracks and k[0] not in have]
                if missing:
                    todo.append((c, it, idx, seed, missing))
            total += len(members)
            done += len(members) - len(todo)
            if not todo:
                continue
            stored = None
            if "random_matched" in spec.conditions:
                rows = store.rows(CALIBRATION_TABLE, "WHERE key = ?",
                                  [calibration_key(spec, model, cell, everyone, frame)])
                stored = {k: rows[0][k] for k in ("eta", "target_js", "achieved_js")} if rows else None
            units.append(WorkUnit("|".join(map(str, (model, *cell, frame))),
                                  FrameWork(model, provenance_id, cell, frame, todo, everyone, stored)))
    return Planned(units, total, done, label=model)


def frame_row_tokens(spec, unit: WorkUnit) -> int:
    """The decode bound of one (cell, frame) unit: :func:`unit_row_tokens` of each of its pending
    (item, seed) units' records (their task answers once, in this frame)."""
    work: Any = unit.payload
    return sum(unit_row_tokens(spec, [d for _, _, d in missing]) for _, _, _, _, missing in work.todo)


def unit_row_tokens(spec, pending: list[dict]) -> int:
    """Upper bound on the decoder's row-tokens for one (model, cell, item, seed) unit's pending
    records (their design fields, as ``owmi.runner.planned_keys`` gives them): each record's probe
    answer to its budget (Track C's reflection budget), plus the task answer under every model
    condition once per context frame those records run in (the runner prepares a unit once per
    frame, ``OwmiSpec.frames``). ``run_plan`` and the runner's progress bar count with this one
    function, so the bar counts down from the dry run's number."""
    from tamperbench.owmi.engine.unit import MODEL_CONDITIONS

    if not pending:
        return 0
    frames = {spec.frame(d["track"]) for d in pending}
    task = len(frames) * sum(c in MODEL_CONDITIONS for c in spec.conditions) * spec.task_max_new_tokens
    if spec.readout == "choice":  # a token-level read-out decodes no probe answer
        return task
    return task + sum(spec.reflection_max_new_tokens if d["track"] == "C" else spec.probe_max_new_tokens
                      for d in pending)


def pending_units(spec, items: dict, have: set, models: list[str] | None = None):
    """(item, pending design fields, stored record count) of every unit, in the runner's plan order
    (owmi/run/runner.py), keyed with the runner's own ``planned_keys``: "stored" is what a resume skips."""
    from tamperbench.owmi.run.keys import planned_keys, unit_coords

    units = [(model, b, obj, op, it, seed) for model in (spec.models if models is None else models)
             for b in spec.benchmarks for obj in spec.objects for op in spec.operators for it in items[b]
             for seed in spec.seeds]
    for model, b, obj, op, it, seed in units:
        keys = planned_keys(spec, unit_coords(spec, model, b, obj, op, it, seed), spec.observer_models)
        pending = [d for k, _, d in keys if k not in have]
        yield it, pending, len(keys) - len(pending)


def run_plan(spec, out, backend) -> Plan:
    """Pending OWMI records of ``spec`` against run directory ``out`` (nothing written).

    A unit is one record (the store's key: model, cell, item, seed, track, probe family, scope,
    condition, observer tier), counted with the runner's own ``planned_keys``, so "already stored"
    is exactly what a resume skips. Row-tokens, an upper bound (``unit_row_tokens``): each
    pending record's probe answer to its budget, plus each pending unit's task answer under every
    model condition, per context frame. Prefill, without the runner's prefix sharing (an upper
    bound too): each pending record's item prompt and probe text. Impact-matching forwards and
    the teacher-forced effects are not counted (see the notes); the ETA is calibrated on the first
    model of the spec."""
    from tamperbench.owmi.protocol.probes import probe_text
    from tamperbench.owmi.protocol.records import RUNS_TABLE
    from tamperbench.owmi.run.keys import load_items

    items = {b: load_items(b, spec.items_per_benchmark) for b in spec.benchmarks}
    store = open_read_only(out)
    try:
        have = store.keys(RUNS_TABLE) if store.has_table(RUNS_TABLE) else set()
    finally:
        store.close()
    n_layers = int(backend.model.config.num_hidden_layers)
    probe_ids: dict[tuple[str, str], int] = {}
    todo = stored = row_tokens = prefill = 0
    for it, pending, n_stored in pending_units(spec, items, have):
        stored += n_stored
        todo += len(pending)
        row_tokens += unit_row_tokens(spec, pending)
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
