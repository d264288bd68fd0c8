"""OWMI's plan, in one module: which records a spec writes, keyed before any compute
(:func:`unit_coords`, :func:`planned_keys`), what the store already holds (:func:`open_store`: an
older table refused, the stored units counted), the run driver's work units (:func:`plan_frames`, one
per cell and context frame), what the progress bar counts down from (:func:`frame_row_tokens`) and
what ``--dry-run`` prints (:func:`run_plan`).

Why keys before any compute: every record's key is the hash of its design coordinates (cell, item,
seed, track, probe, scope, condition, observer), known from the spec alone, so "stored" is exactly
what a resume skips, and a resumed run skips a unit whose records are all stored without loading
anything for it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tamperbench.errors import UserError
from tamperbench.estimate import Plan, open_read_only
from tamperbench.owmi.protocol.design import frames
from tamperbench.owmi.protocol.records import CALIBRATION_TABLE, RUNS_TABLE, OwmiCalibration, OwmiRun
from tamperbench.owmi.run.spec import load_items, spec_items
from tamperbench.runs.driver import Planned
from tamperbench.runs.units import WorkUnit
from tamperbench.store import RunStore, trial_key

__all__ = ["TABLES", "FrameWork", "frame_row_tokens", "load_items", "open_store", "pending_units", "plan_frames",
           "planned_keys", "refuse_older_table", "run_plan", "stored_units", "unit_coords", "unit_row_tokens"]

TABLES = ((RUNS_TABLE, OwmiRun), (CALIBRATION_TABLE, OwmiCalibration))  # what a run writes


def unit_coords(spec, model: str, bench: str, obj, op, item, seed: int) -> dict:
    """The design coordinates of one (model, cell, item, seed) unit, as every key of its records holds them."""
    return dict(model=model, benchmark=bench, object=obj.model_dump(mode="json"), operator=op.name, dose=op.dose,
                item=item.id, seed=seed, positions=spec.positions, when=spec.when, readout=spec.readout)


def planned_keys(spec, coords: dict, observers: Sequence[str]) -> list[tuple[str, str, dict]]:
    """(key, pair_id, design fields) of every record a unit writes."""
    out = []
    for track in spec.tracks:
        fams = ("spontaneous",) if track == "C" else spec.probes
        for fam in fams:
            for scope in spec.scopes:
                pair = dict(coords, track=track, probe=fam, scope=scope)
                pair_id = trial_key(pair)[:24]
                for cond in spec.conditions:
                    d: dict[str, Any]
                    if cond != "observer":
                        d = dict(condition=cond, observer_tier=None, observer_model=None)
                        out.append((trial_key({**pair, **d}), pair_id, {**d, "track": track, "probe": fam, "scope": scope}))
                        continue
                    for tier, name in [(1, coords["model"]), *[(2, o) for o in observers]]:
                        d = dict(condition=cond, observer_tier=tier, observer_model=name)
                        out.append((trial_key({**pair, **d}), pair_id, {**d, "track": track, "probe": fam, "scope": scope}))
    return out


def refuse_older_table(spec, store: RunStore) -> None:
    """A run whose table predates a column of its shape was written by an older tamperbench; its
    records may differ from what this one writes for the same keys (Track C's context lost the
    introspection system prompt when ``system_prompt`` was added), so resuming it would mix the two
    in one table. One line, before any table is created or record computed."""
    for table, shape in TABLES:
        if not store.has_table(table):
            continue
        have = {c for (c,) in store.con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]).fetchall()}
        lacking = sorted(set(shape.model_fields) - have)
        if lacking:
            raise UserError(f"{store.run_dir}: table {table} was written by an older tamperbench (no column "
                            f"{', '.join(lacking)}); its records are not comparable with this version's: use "
                            "another --out or pass --new to replace it")


def stored_units(spec, store: RunStore) -> tuple[int, int]:
    """(units, units whose records are all stored) of every model: the (model, cell, item, seed)
    counts ``owmi run`` prints, read when the store opens, before anything is written."""
    have = store.keys(RUNS_TABLE)
    units = [not pending for _, pending, _ in pending_units(spec, spec_items(spec), have)]
    return len(units), sum(units)


def open_store(spec, store: RunStore, tally: dict | None = None) -> None:
    """The driver's ``on_open``: an older table is refused; ``tally`` (when given) gets the stored
    unit counts (``units``, ``skipped``) ``owmi run`` prints."""
    refuse_older_table(spec, store)
    if tally is not None:
        tally["units"], tally["skipped"] = stored_units(spec, store)


@dataclass(frozen=True)
class FrameWork:
    """One work unit's payload: the pending (item, seed) units of one cell in one context frame
    (``protocol/design.py``'s ``frames``), all picklable. ``todo``: ``(Cell, item, item index, seed, unstored keys)``
    of the frame's units with a record to write; ``everyone``: ``(Cell, item, item index, seed)`` of
    every unit of the cell (impact matching runs over all of them); ``calibration``: the cell's
    stored impact-matching row in this frame (``eta``, ``target_js``, ``achieved_js``), or None;
    ``calibration_key``: that row's key (:func:`calibration_key`; empty without ``random_matched``)."""

    model: str
    provenance_id: str
    cell: tuple  # (benchmark, object label, operator, dose)
    frame: str
    todo: list
    everyone: list
    calibration: dict | None = None
    calibration_key: str = ""


def calibration_key(spec, model: str, cell: tuple, everyone: list, frame: str) -> str:
    """One eta per cell and frame, over every (item, seed) of the cell; the shared frame's key is the
    one runs have always used, the neutral frame's (Track C) adds the frame."""
    coords = dict(model=model, cell=list(cell), items=sorted({it.id for _, it, _, _ in everyone}),
                  seeds=list(spec.seeds))
    return trial_key(coords if frame == "shared" else {**coords, "frame": frame})


def plan_frames(spec, store, provenance_id: str, model: str) -> Planned:
    """``model``'s pending work against ``store``: one :class:`WorkUnit` per (cell, context frame)
    with a record to write, in the order the records have always been written (cells in spec order,
    frames in track order). The bar counts (item, seed) units per frame."""
    from tamperbench.owmi.engine.unit import Cell

    items = spec_items(spec)
    have = store.keys(RUNS_TABLE)
    by_frame = frames(spec.tracks, spec.track_c_system)
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
        for fr, tracks in by_frame.items():  # a frame's units share a task context
            todo = []
            for c, it, idx, seed, keys in members:
                missing = [k for k in keys if k[2]["track"] in tracks and k[0] not in have]
                if missing:
                    todo.append((c, it, idx, seed, missing))
            total += len(members)
            done += len(members) - len(todo)
            if not todo:
                continue
            stored, cal_key = None, ""
            if "random_matched" in spec.conditions:
                cal_key = calibration_key(spec, model, cell, everyone, fr)
                rows = store.rows(CALIBRATION_TABLE, "WHERE key = ?", [cal_key])
                stored = {k: rows[0][k] for k in ("eta", "target_js", "achieved_js")} if rows else None
            units.append(WorkUnit("|".join(map(str, (model, *cell, fr))),
                                  FrameWork(model, provenance_id, cell, fr, todo, everyone, stored, cal_key)))
    return Planned(units, total, done, label=model)


def frame_row_tokens(spec, unit: WorkUnit) -> int:
    """The decode bound of one (cell, frame) unit: :func:`unit_row_tokens` of each of its pending
    (item, seed) units' records (their task answers once, in this frame)."""
    work: Any = unit.payload
    return sum(unit_row_tokens(spec, [d for _, _, d in missing]) for _, _, _, _, missing in work.todo)


def unit_row_tokens(spec, pending: list[dict]) -> int:
    """Upper bound on the decoder's row-tokens for one (model, cell, item, seed) unit's pending
    records (their design fields, as ``planned_keys`` gives them): each record's probe
    answer to its budget (Track C's reflection budget), plus the task answer under every model
    condition once per context frame those records run in (``runner.work`` prepares a unit once per
    frame, ``protocol/design.py``'s ``frames``). ``run_plan`` and the run's progress bar count with this one
    function, so the bar counts down from the dry run's number."""
    from tamperbench.owmi.engine.unit import MODEL_CONDITIONS

    if not pending:
        return 0
    in_frames = frames(tuple(d["track"] for d in pending), spec.track_c_system)
    task = len(in_frames) * sum(c in MODEL_CONDITIONS for c in spec.conditions) * spec.task_max_new_tokens
    if spec.readout == "choice":  # a token-level read-out decodes no probe answer
        return task
    return task + sum(spec.reflection_max_new_tokens if d["track"] == "C" else spec.probe_max_new_tokens
                      for d in pending)


def pending_units(spec, items: dict, have: set, models: list[str] | None = None):
    """(item, pending design fields, stored record count) of every (model, cell, item, seed) unit, in
    spec order, keyed with :func:`planned_keys` as the run keys them: "stored" is what a resume skips."""
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
    condition, observer tier), counted with :func:`planned_keys` as the run keys them, so "already stored"
    is exactly what a resume skips. Row-tokens, an upper bound (``unit_row_tokens``): each
    pending record's probe answer to its budget, plus each pending unit's task answer under every
    model condition, per context frame. Prefill, without the runner's prefix sharing (an upper
    bound too): each pending record's item prompt and probe text. Impact-matching forwards and
    the teacher-forced effects are not counted (see the notes); the ETA is calibrated on the first
    model of the spec."""
    from tamperbench.owmi.protocol.probes import probe_text

    items = spec_items(spec)
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
