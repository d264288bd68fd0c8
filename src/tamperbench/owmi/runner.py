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

Why records are committed per *group*, not per unit: a unit (cell, item, seed) runs for minutes
(every track, probe, scope, condition and observer). Its records are written as soon as the batch
that computes them finishes -- one track's batched rows (every model condition x scope x probe
family), one observer tier of a track (every probe family) -- each group in one transaction, so a
run killed at any moment loses at most the group in flight. (The one-at-a-time reference engine,
``Engine(batched=False)``, groups a delayed or visible track per condition and the observer per
probe family.) On resume a group whose keys are all stored is not recomputed;
a group is computed exactly as in an uninterrupted run (same batch rows), so resumed records equal
the ones an uninterrupted run writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.owmi.keys import load_items, planned_keys, unit_coords
from tamperbench.owmi.records import CALIBRATION_TABLE, RUNS_TABLE, OwmiCalibration, OwmiRun
from tamperbench.owmi.spec import OwmiSpec
from tamperbench.store import RunStore, trial_key


@dataclass
class RunReport:
    written: int = 0
    skipped_units: int = 0
    units: int = 0
    seconds: float = 0.0
    row_tokens: int = 0  # the decode bound the bars counted down from (owmi/plan.py's row-token model, every model)
    tokens: int = 0  # decoded, counted as that bound counts (each record's answer, each frame's task answers)


def run(spec: OwmiSpec, out: str | Path, *, new: bool = False, console: Console | None = None) -> RunReport:
    from tamperbench.models import load_backend
    from tamperbench.owmi.engine import Cell, Engine
    from tamperbench.owmi.objects import resolve
    from tamperbench.owmi.plan import pending_units
    from tamperbench.progress import ETA_FIELDS, countdown as bar_countdown, progress_bar

    console = console or Console(stderr=True)
    rep, t0 = RunReport(), time.perf_counter()
    from tamperbench.owmi.validate import preflight

    preflight(spec)  # every model's objects, from its config: a bad second model is refused now
    items = {b: load_items(b, spec.items_per_benchmark) for b in spec.benchmarks}
    with RunStore.open(out, spec, new=new) as store:
        for table, shape in ((RUNS_TABLE, OwmiRun), (CALIBRATION_TABLE, OwmiCalibration)):
            _refuse_older_table(store, table, shape)
            store.ensure_table(table, shape)
        have = store.keys(RUNS_TABLE)
        for model in spec.models:
            backend = load_backend(model, device=spec.device, dtype=spec.dtype)
            from tamperbench.suites import get_suite

            get_suite("owmi").check_backend(backend)  # hooks and whole distributions, or one line now
            from tamperbench.owmi.validate import check_choice_options

            check_choice_options(spec, backend, f"models ({model})")
            for i, obj in enumerate(spec.objects):  # refuse a bad object before any compute
                resolve(backend.model, obj, field=f"objects[{i}]")
            from tamperbench.owmi.validate import check_positions

            check_positions(spec, backend, items, f"models ({model})")  # by tokenizing: before any forward
            observers = [(o, load_backend(o, device=spec.device, dtype=spec.dtype)) for o in spec.observer_models]
            for o, ob in observers:
                check_choice_options(spec, ob, f"observer_models ({o})", int(backend.model.config.num_hidden_layers))
            prov = store.put_provenance(backend.provenance)
            eng = Engine(backend, spec, observers)
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
                                bar.advance(task)
                            else:
                                todo.append(everyone[-1])
                        if todo:
                            _run_frame(store, eng, spec, model, key, frame, todo, everyone, have, prov, backend,
                                       observers, bar, task, rep, countdown)
            rep.tokens += countdown.tokens
        if spec.observer_classifier:
            from tamperbench.owmi.observer_classifier import classifier_rows

            rep.written += store.write(RUNS_TABLE, classifier_rows(store.rows(RUNS_TABLE)))
    rep.seconds = time.perf_counter() - t0
    return rep


def _run_frame(store, eng, spec, model, key, frame, todo, everyone, have, prov, backend, observers, bar, task,
               rep, countdown) -> None:
    """The units of one cell in one context frame (``OwmiSpec.frame``): prepare, impact-match over
    the frame's units, then execute and write each unit's missing records group by group."""
    from tamperbench.owmi.engine import MODEL_CONDITIONS

    bar.update(task, what=f"{key[1]} {key[2]}={key[3]}: baseline + treatment")
    units = [(eng.prepare(c, it, idx, seed, frame), keys) for c, it, idx, seed, keys in todo]
    if "random_matched" in spec.conditions:
        bar.update(task, what=f"{key[1]}: impact matching")
        _calibration(store, eng, spec, model, key, [u for u, _ in units], everyone, frame)
    for unit, keys in units:
        bar.update(task, what=f"{unit.item.id}")
        missing = [k for k in keys if k[0] not in have]
        _effects(eng, spec, unit, missing, MODEL_CONDITIONS)
        for recs in _execute(eng, spec, unit, missing, prov, backend, observers, on_tokens=countdown.add):
            rep.written += store.write(RUNS_TABLE, recs)
        # the frame's task answers, one per model condition (as owmi/plan.py unit_row_tokens counts them)
        countdown.add(sum(len(unit.gens[c][1]) for c in MODEL_CONDITIONS if c in unit.gens))
        eng.release(unit)
        bar.advance(task)


def _calibration(store, eng, spec, model, key, units, everyone, frame: str = "shared") -> None:
    """One eta per cell and frame, over every (item, seed) of the cell (``everyone``), stored before
    any of the cell's records: a resumed cell finds it and reuses it whatever subset is left to run.
    The neutral frame (Track C) is matched on its own task contexts; the shared frame's key is the
    one runs have always used."""
    items = sorted({it.id for _, it, _, _, _ in everyone})
    coords = dict(model=model, cell=list(key), items=items, seeds=list(spec.seeds))
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
        key=cal_key, provenance_id=eng.b.provenance_id, model=model, site=key[1], operator=key[2], dose=key[3],
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


def _effects(eng, spec, unit, missing, model_conditions) -> None:
    """The teacher-forced effects of the conditions the missing records need. Batched: every
    model condition of the spec in one batch whenever any is needed (the same batch rows whatever
    a resumed run still lacks)."""
    need = {d["condition"] for _, _, d in missing}
    if eng.batched:
        conds = [c for c in eng.model_conditions() if c not in unit.effects]
        if conds and need & set(conds):
            unit.effects.update(eng.effects_rows(unit, conds))
        return
    for cond in model_conditions:
        if cond not in unit.effects and cond in need:
            unit.effects[cond] = eng.effect(unit, cond)


def _group(eng, d: dict) -> tuple:
    """The batch that computes a record (and the transaction that commits it)."""
    cond, tier = d["condition"], d["observer_tier"]
    if cond == "observer":
        return (d["track"], "observer", tier) if eng.batched else (d["track"], "observer", tier, d["probe"])
    if d["track"] in ("A", "B_masked") or eng.batched:
        return (d["track"], "rows")
    return (d["track"], cond)


def _execute(eng, spec, unit, keys, prov, backend, observers, on_tokens=None) -> Iterator[list[OwmiRun]]:
    """The records of ``keys`` (one unit's unstored keys), one list per group as soon as the group's
    batch finishes (see the module docstring); groups with no key in ``keys`` are not computed.
    ``on_tokens`` gets each group's answer tokens, one answer per record (the bar's ETA)."""
    want: dict[tuple, list] = {}

    def records(group, res) -> list[OwmiRun]:
        if on_tokens is not None:
            on_tokens(sum(len(_result(res, d)[3][0]) for _, _, d in want[group]))
        return [_record(eng, spec, unit, k, res, prov, observers) for k in want[group]]

    for k in keys:
        want.setdefault(_group(eng, k[2]), []).append(k)
    conds = [c for c in spec.conditions if c != "observer"]
    for track in spec.tracks:
        fams = ("spontaneous",) if track == "C" else spec.probes
        max_new = spec.reflection_max_new_tokens if track == "C" else spec.probe_max_new_tokens
        batched = eng.batched or track in ("A", "B_masked")
        batches = [((track, "rows"), None)] if batched else [((track, c), c) for c in conds]
        for group, cond in batches:
            if group not in want:
                continue
            t = time.perf_counter()
            got = (_batched_probe(eng, spec, unit, track, fams, max_new) if eng.batched else
                   eng.probe_fresh(unit, track, conds, fams, spec.scopes, max_new) if cond is None else
                   eng.probe_delayed(unit, cond, fams, spec.scopes, max_new) if track in ("B_delayed", "C") else
                   eng.probe_visible(unit, cond, fams, spec.scopes, max_new))
            dt = (time.perf_counter() - t) / max(len(got), 1)
            res: dict[tuple, tuple] = {(track, fam, scope, c, None): (*v, dt) for (c, fam, scope), v in got.items()}
            yield records(group, res)
        if "observer" not in spec.conditions:
            continue
        for tier, name, b in [(1, spec_model(unit), backend), *[(2, o, ob) for o, ob in observers]]:
            if eng.batched:
                if (track, "observer", tier) in want:
                    t = time.perf_counter()
                    obs = eng.observe_rows(b, unit, track, fams, max_new)
                    dt = (time.perf_counter() - t) / max(len(obs), 1)
                    res = {(track, fam, scope, "observer", tier): (text, ids, [], resp, dt, probe3, name)
                           for fam, (text, ids, probe3, resp) in obs.items() for scope in spec.scopes}
                    yield records((track, "observer", tier), res)
                continue
            for fam in fams:
                obs_group = (track, "observer", tier, fam)
                if obs_group not in want:
                    continue
                t = time.perf_counter()
                text, ids, probe3, resp = eng.observe(b, unit, track, fam, max_new)
                one: tuple = (text, ids, [], resp, time.perf_counter() - t, probe3, name)
                res = {(track, fam, scope, "observer", tier): one for scope in spec.scopes}
                yield records(obs_group, res)


def _batched_probe(eng, spec, unit, track, fams, max_new) -> dict:
    if track in ("B_delayed", "C"):
        return eng.probe_delayed_rows(unit, fams, spec.scopes, max_new)
    return eng.probe_rows(unit, track, fams, spec.scopes, max_new)


def _record(eng, spec, unit, k, res, prov, observers) -> OwmiRun:
    """One stored record (Appendix D fields) from its planned key and its computed result."""
    from tamperbench.owmi.engine import parsed_fields

    key, pair_id, d = k
    item, cell, op = unit.item, unit.cell, unit.cell.op
    got = _result(res, d)
    text, ids, declared, answer, dt = got[:5]
    toks, reply, fin = answer[:3]
    cond = d["condition"]
    probe = got[5] if cond == "observer" else _first_probe(eng, d["probe"])
    eff = unit.effects.get(cond, {}) if cond != "observer" else {}
    gen = unit.gens.get(cond) if cond != "observer" else None
    task_out = "" if d["track"] in ("A", "B_masked") else (gen[2] if gen else None)
    cell_id = trial_key(dict(model=cell.model, benchmark=cell.benchmark, object=cell.obj.label, operator=op.name,
                             dose=op.dose, probe=d["probe"], track=d["track"], readout=spec.readout))[:24]
    return OwmiRun(
        key=key, provenance_id=prov, pair_id=pair_id, cell_id=cell_id, model=cell.model,
        model_revision=_revision(eng.b),  # the subject's: every observer tier of a cell meets in that cell (Eq. 8)
        observer_revision=_revision(dict(observers)[d["observer_model"]]) if d["observer_tier"] == 2 else None,
        dtype=str(eng.b.provenance.dtype), quantized=bool(eng.b.provenance.quantization),
        temperature=spec.temperature, top_p=spec.top_p,
        max_new_tokens=(0 if spec.readout == "choice" else spec.reflection_max_new_tokens if d["track"] == "C"
                        else spec.probe_max_new_tokens),
        readout=spec.readout, readout_detail=_readout_detail(eng, spec, d["probe"], d["scope"] if cond != "observer" else None),
        benchmark=cell.benchmark, domain=item.domain, item_id=item.id,
        item_provenance=json.dumps(item.provenance.model_dump(mode="json"), sort_keys=True), gold_answer=item.answer,
        object_kind=cell.obj.kind, site=cell.obj.label, layer=cell.obj.layer, head=cell.obj.head,
        sae_feature=cell.obj.feature, sae_path=cell.obj.sae_path, operator=op.name, dose=op.dose,
        positions=spec.positions, when=spec.when, concept=unit.concept, seed=unit.seed, condition=cond,
        hook_scope=d["scope"], track=d["track"], probe_family=d["probe"], probe_text=probe,
        observer_tier=d["observer_tier"], observer_model=d["observer_model"], prompt_text=text, prompt_ids=ids,
        system_prompt=unit.system,
        intervened_positions=[] if cond in ("sham", "observer") else list(declared),
        task_output=task_out, task_correct=_task_score(item, task_out), response=reply, finish_reason=fin,
        true_category=item.domain, seconds=dt,
        random_norm=(unit.norm_unit if cond == "random_unit" else unit.eta if cond == "random_matched" else None),
        match_target_js=unit.match[0] if cond == "random_matched" and unit.match else None,
        match_achieved_js=unit.match[1] if cond == "random_matched" and unit.match else None,
        **{k: v for k, v in eff.items()},
        **(_choice_fields(eng, d["probe"], answer[3]) if len(answer) > 3 else parsed_fields(d["probe"], reply,
                                                                                             eng.n_layers)))


def _readout_detail(eng, spec, family: str, scope: str | None = None) -> str | None:
    """The record's read-out beyond its name (JSON): choice's forced prefix, options and scoring (and,
    under the active scope, its label: first-order leakage)."""
    if spec.readout == "choice":
        from tamperbench.owmi.choice import closed_set

        return json.dumps(closed_set(family, eng.n_layers).detail(scope))
    if spec.readout == "constrained":
        g = eng.grammar(family)
        return json.dumps({"readout": "constrained", **(g.provenance() if g is not None else
                                                         {"grammar": None, "note": "free text: decoded unconstrained"})})
    return None


def _choice_fields(eng, family: str, scores) -> dict:
    from tamperbench.owmi.choice import closed_set, fields

    return fields(closed_set(family, eng.n_layers), scores)


def _result(res: dict, d: dict) -> tuple:
    """A record's computed result: (prompt text, prompt ids, declared, (answer ids, answer, finish), ...)."""
    return res[(d["track"], d["probe"], d["scope"], d["condition"], d["observer_tier"])]


def _revision(backend) -> str:
    return backend.provenance.weights_revision


def _first_probe(eng, fam: str) -> str:
    from tamperbench.owmi.probes import probe_text

    return probe_text(fam, person="first", n_layers=eng.n_layers)


def _task_score(item, out: str | None) -> float | None:
    if not out:
        return None
    from tamperbench.owmi.items import score_task

    return score_task(item, out)


def spec_model(unit) -> str:
    return unit.cell.model
