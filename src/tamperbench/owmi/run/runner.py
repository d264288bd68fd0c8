"""Run (or resume) an OWMI spec into a run directory through the run driver (:mod:`tamperbench.runs.driver`):
:func:`run` (which ``owmi run`` and the known-positive check call), everything the driver calls but the
plan -- every check before any compute, the worker's context, the worker -- and the suite's
definition (``SUITE``, at the end: the driver's table of contents).

The run reads top-down in the driver's order:

1. here: :func:`run` -> :func:`validate` (every check that reads configs, before any model loads:
   :func:`preflight`) -> per model, once loaded, :func:`check_loaded` -> :func:`context` (its observers
   loaded and checked, its engine picked once); :func:`setup_worker` does the last two in another process;
2. ``owmi/run/plan.py``: ``open_store`` (an older table refused, the stored units counted) ->
   ``plan_frames`` (one work unit per cell and context frame, keyed before any compute, so a resume
   skips what is stored) -> ``frame_row_tokens`` (the bar's bound);
3. here again, the worker: :func:`work` per unit: the engine prepares and impact-matches the cell's
   units (:func:`prepare`: the calibration row stored first), then computes and builds the records
   batch by batch (``Engine.records``), each batch committed by the driver; after the last unit
   ``owmi/score/tables.py``'s ``finish`` adds the tier-3 classifier's rows.

Why in one module (the suite contract's ``runner.py``: the worker and ``SUITE``): the driver calls
back into the suite before its plan (checks, context) and after it (the worker); a reader follows
``run`` -> the checks -> the plan -> the worker and back to this module once, and every call into the
engine goes through its interface (``engine/__init__.py`` before any forward, ``engine/base.py``
per unit).

Why records are committed per *batch* (group), not per unit: a unit (cell, item, seed) runs for
minutes (every track, probe, scope, condition and observer). Its records are written as soon as the
batch that computes them finishes, each batch in one transaction, so a run killed at any moment
loses at most the batch in flight. Which batches there are is the engine's (``Engine.group``): the
batched engine computes one track's model conditions x scopes x probe families as one batch and one
observer tier of a track as another; the reference engine a delayed or visible track per condition
and the observer per probe family. On resume a batch whose keys are all stored is not recomputed; a
batch is computed exactly as in an uninterrupted run (same batch rows), so resumed records equal
the ones an uninterrupted run writes. After the last unit the driver's ``finish`` (the tier-3
observer classifier's rows) is ``owmi/score/tables.py``'s.

Each check is one call into the module that knows the answer: the engine checks a spec against a
model (the engine package's ``check``: positions, objects, option sets), the suite registry checks the
backend's capabilities; this module is the one place that calls them, so every entry point (``owmi
run``, its ``--dry-run``, the known-positive check) validates the same way, once.

Why from configs: with several models in a spec, an object that does not exist in the *second*
model (a layer or head index out of range, an unsupported architecture, SAE weights whose width
does not match the site) would otherwise surface only after the first model had run for minutes
and written its records. Every check the engine makes before a model loads reads only the model's
config (layers, heads, hidden size, architecture, context length) and the SAE folder, so each local
model is checked from its ``config.json`` alone -- no weights loaded -- before the run directory is
opened. Doses and every other field are checked when the spec is parsed.

Scope: local models (``embedded``, a transformers directory, a ``.gguf``, a hub id in the local
cache). A remote scheme (``openai:``, ``vllm:``) among ``models`` is refused here too, from its
name alone: OWMI hooks the weights, and neither backend offers hooks (``Capability.HOOKS``). The
capability check at load would refuse it as well, but only after every model before it had run.
Remote schemes stay welcome in ``observer_models``: the observer reads text only.

Why context frames (``protocol/design.py``'s ``frames``): Track C's contexts carry no introspection
system prompt (by default), so its task turn -- and with it the baseline answer, the treatment's
divergence and the impact-matched norm -- differs from the other tracks'. A cell's units are
prepared, calibrated and run once per frame; record keys are unchanged, and every record names its
``system_prompt``. A run directory written before that column existed is refused (its Track C
records were made under the introspection prompt), so old and new records never share a table.
(``run/validate.py`` and ``run/execute.py``, where the checks and the worker lived, still import,
with a DeprecationWarning.)
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.owmi.protocol.records import CALIBRATION_TABLE, RUNS_TABLE, OwmiCalibration, OwmiRun
from tamperbench.owmi.run import plan
from tamperbench.owmi.run.context import OwmiContext, RunReport
from tamperbench.owmi.run.spec import OwmiSpec, spec_items
from tamperbench.owmi.score import tables
from tamperbench.runs.driver import Executor, SuiteDef
from tamperbench.runs.driver import run as drive
from tamperbench.runs.units import Finished, WorkUnit
from tamperbench.store import RunStore

__all__ = ["SUITE", "OwmiContext", "RunReport", "check_loaded", "context", "preflight", "prepare", "run", "setup_worker",
           "unit_records", "validate", "work"]

LOCAL_SCHEMES = ("embedded", "dir", "gguf", "hub")
NO_HOOK_SCHEMES = ("openai", "vllm")  # the built-in backends that cannot hook (a plugin scheme may)


def run(spec: OwmiSpec, out: str | Path, *, new: bool = False, console: Console | None = None,
        executor: Executor | None = None) -> RunReport:
    """Run (or resume) ``spec`` into ``out`` through the run driver; returns what was done. Without
    ``new``, an older run directory is refused before any model loads (the driver's ``on_open``
    refuses it too, once the store opens, for ``tamperbench run``)."""
    t0, tally = time.perf_counter(), dict[str, int]()
    if not new:
        _refuse_older_run(spec, out)
    suite = dataclasses.replace(SUITE, on_open=functools.partial(plan.open_store, tally=tally))
    res = drive(suite, spec, out, new=new, console=console, executor=executor)
    return RunReport(written=res.written[RUNS_TABLE], skipped_units=tally.get("skipped", 0),
                     units=tally.get("units", 0), seconds=time.perf_counter() - t0, row_tokens=res.row_tokens,
                     tokens=res.tokens)


def _refuse_older_run(spec: OwmiSpec, out: str | Path) -> None:
    """An older run directory, refused before any model loads; a directory that cannot be read here
    is left to the driver's own checks."""
    from tamperbench.estimate import open_read_only

    try:
        store = open_read_only(out)
    except Exception:  # not a readable run directory: the driver says why, in one line
        return
    try:
        if isinstance(store, RunStore):
            plan.refuse_older_table(spec, store)
    finally:
        store.close()


def validate(spec) -> None:
    """Every check of ``spec`` that needs no loaded model, in one place, before any compute (the
    driver's ``preflight``): the read-out's library, every (model, object) from the model's config,
    positions against each model's context, observers' weights present, and the items loaded. Each
    model's loaded checks follow in :func:`check_loaded` (a spec of several models loads one at a time)."""
    preflight(spec)
    spec_items(spec)


def preflight(spec) -> None:
    """Every (model, object) of ``spec``, checked before any compute; one line naming both."""
    from tamperbench.models.registry import scheme_of
    from tamperbench.owmi.engine import check

    check_readout(spec)
    for i, name in enumerate(spec.models):
        if scheme_of(name) in NO_HOOK_SCHEMES:
            from tamperbench.models.protocols import Capability

            raise UserError(f"models[{i}] ({name}): OWMI alters the model's internals and needs "
                            f"{Capability.HOOKS.value}, which a '{scheme_of(name)}' backend does not offer; "
                            f"{Capability.HOOKS.instead}, or list it under observer_models (text only)")
        if scheme_of(name) not in LOCAL_SCHEMES:
            continue  # a scheme registered by a plugin: its own capability check runs at load
        check(spec, SimpleNamespace(config=model_config(name, f"models[{i}]")), name, index=i)  # positions, objects
    for i, name in enumerate(spec.observer_models):
        observer_available(name, f"observer_models[{i}]")


def check_readout(spec) -> None:
    """The read-out's own needs, before any model loads: ``constrained`` needs the grammar library."""
    if spec.readout != "constrained":
        return
    from tamperbench.models.decoding.grammar import require_llguidance

    require_llguidance("readout 'constrained'")


def model_config(spec: str, field: str):
    """The transformers config of a local model spec, read without loading its weights."""
    from tamperbench.models.sources import resolve as resolve_source

    src = resolve_source(spec)
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(src.load_dir)
    except Exception as err:  # transformers raises many kinds for an unreadable config
        raise UserError(f"{field}: transformers cannot read the config of {src.load_dir} "
                        f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})") from None


def observer_available(name: str, field: str) -> None:
    """A tier-2 observer whose weights are not here is refused before any model runs, without
    loading it: a packaged alias needs its package, a hub id its local cache, a path must exist
    (remote schemes are checked when they connect)."""
    from pathlib import Path

    from tamperbench.models.adapter import MARK
    from tamperbench.models.installable import installed, lookup, missing_line
    from tamperbench.models.registry import scheme_of
    from tamperbench.models.sources import HUB_ID

    scheme, base = scheme_of(name), name.partition(MARK)[0].strip()
    if scheme not in LOCAL_SCHEMES or scheme == "embedded":
        return
    model = lookup(base)
    if model is not None:  # an installable model package (models/installable.py)
        if not installed(model):
            raise UserError(f"{field}: {missing_line(model)}")
        return
    if scheme == "hub" and HUB_ID.match(base) and not Path(base).expanduser().exists():
        from huggingface_hub import snapshot_download

        try:
            snapshot_download(base, local_files_only=True, allow_patterns=["*.json"])
        except Exception:  # not in the local cache (the hub is not asked here)
            raise UserError(f"{field} ({name}): not in the local hub cache, so the run would need a download; "
                            "use an installable observer such as 'gemma3-270m' (tamperbench models install "
                            "gemma3-270m) or a local directory") from None
    elif not Path(base).expanduser().exists():
        raise UserError(f"{field} ({name}): path does not exist")


def check_loaded(spec, backend, model: str) -> None:
    """The checks that need ``model``'s loaded tokenizer or weights, before any forward (and before
    its observers load; the driver's ``check``): hooks and whole distributions, every declared position
    inside every item's prompt, the read-out's options or grammars, every object against the loaded model."""
    from tamperbench.owmi.engine import check
    from tamperbench.suites import get_suite

    get_suite("owmi").check_backend(backend)  # hooks and whole distributions, or one line now
    check(spec, backend, model, items=spec_items(spec))  # positions by tokenizing, option sets, objects


def context(spec, backend, console=None) -> OwmiContext:
    """The worker's context on the loaded model (the driver's ``context``): its tier-2 observers loaded,
    their read-out options checked (asked about ``backend``'s layers) before any forward, and its engine,
    picked once from the model (batched or reference)."""
    from tamperbench.owmi.engine import check_options, engine_for
    from tamperbench.runs.driver import load_model

    observers = [(o, load_model(spec, o)) for o in spec.observer_models]
    for o, ob in observers:
        check_options(spec, ob, f"observer_models ({o})", int(backend.model.config.num_hidden_layers))
    return OwmiContext(spec, backend, observers, engine_for(backend, spec, observers))


def setup_worker(config: tuple) -> OwmiContext:
    """Worker setup in another process (``config``: the spec and the model under test): load it, check
    it, build its context, as the driver does in this one."""
    from tamperbench.runs.driver import load_model

    spec, model = config
    backend = load_model(spec, model)
    check_loaded(spec, backend, model)
    return context(spec, backend)


# ---------------------------------------------------------------------- the worker: per unit, the engine's work
def work(octx: OwmiContext, units: list[WorkUnit], live: Callable[[dict], None] | None = None) -> Iterator[list[Finished]]:
    """Each (cell, frame) unit: one ``Finished`` list per commit group -- the new calibration row
    first, then each batch of records as the engine finishes it -- with ``stats={"tokens": n}``
    (answer tokens, as owmi/run/plan.py's row-token model counts them). An (item, seed) unit's end is
    a ``Finished`` without records carrying ``units: 1`` and its task answers' tokens (the bar)."""
    from tamperbench.owmi.engine.unit import MODEL_CONDITIONS

    eng = octx.engine
    for wu in units:
        key, w = wu.key, wu.payload
        prepared, row = prepare(eng, w)
        if row is not None:
            yield [Finished(key, {CALIBRATION_TABLE: [row]}, {"tokens": 0})]
        for unit, missing in prepared:
            answered: list[int] = []
            for recs in eng.records(unit, missing, w.provenance_id, on_tokens=answered.append):
                yield [Finished(key, {RUNS_TABLE: list(recs)}, {"tokens": answered.pop() if answered else 0})]
            # the frame's task answers, one per model condition (as owmi/run/plan.py unit_row_tokens counts them)
            task = sum(len(unit.gens[c][1]) for c in MODEL_CONDITIONS if c in unit.gens)
            eng.release(unit)
            yield [Finished(key, {}, {"tokens": task, "units": 1})]


def prepare(eng, w: plan.FrameWork) -> tuple[list, OwmiCalibration | None]:
    """The frame's pending (item, seed) units prepared by engine ``eng`` (``(unit, unstored keys)``),
    impact-matched under ``random_matched``, and the calibration row to store first (None when there is
    none to store).

    One eta per cell and frame, over every (item, seed) of the cell, stored before any of the cell's
    records: a resumed cell finds it (``w.calibration``, read by the plan) and reuses it whatever
    subset is left to run. The neutral frame (Track C) is matched on its own task contexts."""
    prepared = [(eng.prepare(c, it, idx, seed, w.frame), missing) for c, it, idx, seed, missing in w.todo]
    if "random_matched" not in eng.spec.conditions:
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
    return prepared, OwmiCalibration(
        key=w.calibration_key, provenance_id=eng.b.provenance_id,
        model=w.model, site=site, operator=operator, dose=dose, seed=-1, item_id=",".join(items), target_js=target,
        achieved_js=achieved, eta=eta, iterations=len(trace), trace=trace, path=eng.calibration_path(),
        system_prompt=eng.frame_system(w.frame))


def unit_records(engine, unit, keys: list, *, provenance_id: str) -> list[OwmiRun]:
    """One prepared unit's records of ``keys`` outside a run directory (the engine tests and
    benchmarks): its teacher-forced effects, then every batch, as ``owmi run`` computes them."""
    return [r for batch in engine.records(unit, keys, provenance_id) for r in batch]


SUITE = SuiteDef(
    name="owmi", spec=OwmiSpec, tables=plan.TABLES,
    worker=("tamperbench.owmi.run.runner:setup_worker", "tamperbench.owmi.run.runner:work"),
    needs=("HookBackend", "ScoringBackend"), models=lambda s: s.models, config=lambda s, m: (s, m),
    preflight=validate, check=check_loaded, context=context,
    on_open=plan.open_store, plan=plan.plan_frames, row_tokens=plan.frame_row_tokens, estimate=plan.run_plan,
    finish=tables.finish, unit="unit", weight=lambda f: int(f.stats.get("units", 0)))
