"""The run driver: the one life cycle every suite's run goes through.

A suite declares its parts in one :class:`SuiteDef` -- its spec type, its record tables, its plan
(pending work units against the store), its worker (import strings, so another process can rebuild
it), the backend capabilities it needs -- and :func:`run` does the rest, in this order:

1. preflight: the suite's own checks of the spec, then the run directory (a bad ``--out`` or a
   directory holding another spec costs no model load);
2. per model (one, or the spec's list): load the backend, check its capabilities and the suite's
   checks that need it, build the worker's context;
3. open the store (once), ensure the record tables, record the backend's provenance;
4. plan: the pending units (stored keys are skipped: this is resume);
5. count down from the plan's decode bound (the number ``--dry-run`` prints) on one progress bar;
6. execute the units (in this process, or on any :class:`~tamperbench.runs.executor.Executor`, e.g.
   ``--executor ray``) and commit each finished batch from this process, the store's only writer;
7. the suite's ``finish`` step (derived rows), then close the store.

:func:`dry_run` prints the plan with an ETA and writes nothing; :func:`run_registered` and
:func:`dry_run_registered` are what ``tamperbench run`` and ``tamperbench sweep`` call for any
registered suite. A service that works on another suite's stored run (the jury) uses the executing
step alone: :func:`execute` and :func:`record_provenance`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.runs.commit import CommitReport, commit
from tamperbench.runs.executor import Executor, InProcessExecutor, Live, Worker
from tamperbench.runs.units import Finished, WorkUnit
from tamperbench.store import RunStore

__all__ = ["Executor", "Planned", "RunContext", "RunResult", "SuiteDef", "dry_run", "dry_run_registered", "execute", "load_model",
           "record_provenance", "run", "run_registered"]


@dataclass
class Planned:
    """A suite's plan against the store: the pending units, and the bar's ``total`` and ``done``
    (in the suite's bar unit, e.g. trials: a unit may hold several)."""

    units: list[WorkUnit]
    total: int
    done: int = 0
    label: str = ""  # the bar's description


@dataclass
class RunContext:
    """The default worker context: the run's spec, the loaded backend and its model name."""

    spec: Any
    backend: Any
    model: str = ""


def load_model(spec: Any, model: str) -> Any:
    """The default loader: ``model`` with the spec's device, dtype, batch size and chat template
    (each where the spec has the field)."""
    from tamperbench.models import load_backend

    kwargs = {k: getattr(spec, k) for k in ("device", "dtype", "batch_size", "chat_template") if hasattr(spec, k)}
    return load_backend(model, **kwargs)


@dataclass(frozen=True)
class SuiteDef:
    """Everything the driver needs from a suite. Required: ``name``, ``spec``, ``tables``, ``worker``
    and ``plan``; every hook below defaults to doing nothing special.

    - ``plan(spec, store, provenance_id, model) -> Planned``: pending units of ``model`` (store read only);
    - ``worker``: ``("module:setup", "module:work")`` (:class:`~tamperbench.runs.executor.Worker`);
      ``config(spec, model)`` is what ``setup`` gets in another process (default: the spec);
    - ``context(spec, backend, console)``: the worker's context on the backend the driver loaded
      (default: a :class:`RunContext`);
    - ``models(spec)``: the models a run loads one after another (default: ``[spec.model]``);
      ``load(spec, model)`` loads one (default :func:`load_model`);
    - ``prepare(spec) -> spec``: fill derived fields before the run directory sees the spec;
      ``preflight(spec)``: checks that need no model; ``check(spec, backend, model)``: checks that
      need the loaded backend, before any compute; ``on_open(spec, store)``: refuse a store layout
      before any table is created; ``finish(spec, store, result)``: derived rows after the commit;
    - ``row_tokens(spec, unit)``: the decode bound of one unit (the bar counts down from it);
      ``estimate(spec, out, backend) -> estimate.Plan``: what ``--dry-run`` prints;
    - the bar: ``unit`` (what it counts), ``weight(finished)`` (how many of them a finished unit
      is; default 1), ``shown`` (summed ``Finished.stats`` counters shown beside it). A worker
      reports ``stats["tokens"]`` (decoded tokens) per finished unit for the countdown.
    """

    name: str
    spec: type[BaseModel]
    tables: tuple[tuple[str, type[BaseModel]], ...]
    worker: tuple[str, str]
    plan: Callable[[Any, Any, str, str], Planned]
    needs: tuple[str, ...] = ()
    context: Callable[[Any, Any, Console], Any] | None = None
    config: Callable[[Any, str], Any] | None = None
    models: Callable[[Any], Sequence[str]] | None = None
    load: Callable[[Any, str], Any] = load_model
    prepare: Callable[[Any], Any] | None = None
    preflight: Callable[[Any], None] | None = None
    check: Callable[[Any, Any, str], None] | None = None
    on_open: Callable[[Any, RunStore], None] | None = None
    finish: Callable[[Any, RunStore, "RunResult"], None] | None = None
    row_tokens: Callable[[Any, WorkUnit], int] | None = None
    estimate: Callable[[Any, Any, Any], Any] | None = None
    calibrate: bool = True  # --dry-run times the loaded model (needs a step decoder)
    unit: str = "units"
    weight: Callable[[Finished], int] | None = None
    shown: tuple[str, ...] = ()

    def model_names(self, spec: Any) -> list[str]:
        return list(self.models(spec)) if self.models is not None else [spec.model]


@dataclass
class RunResult:
    """What a run did, summed over its models; ``contexts`` holds each model's worker context."""

    run_dir: str
    spec: Any
    total: int = 0  # bar units in the spec (e.g. trials)
    done: int = 0  # of those, stored before this run
    units: int = 0  # pending units executed
    written: Counter = field(default_factory=Counter)  # rows added per table
    stats: Counter = field(default_factory=Counter)  # summed Finished.stats
    row_tokens: int = 0  # the decode bound the bar counted down from
    tokens: int = 0  # decoded (the workers' ``tokens`` stats)
    seconds: float = 0.0  # executing and committing
    contexts: dict[str, Any] = field(default_factory=dict)


def check_capabilities(backend: Any, needs: Sequence[str], who: str) -> None:
    """One line when ``backend`` lacks a capability in ``needs`` (names of :mod:`models.protocols`
    capabilities), naming it and what to use instead."""
    from tamperbench.models.protocols import Capability, require

    by_protocol = {c.protocol.__name__: c for c in Capability}
    for name in needs:
        if name in by_protocol:
            require(backend, by_protocol[name], needed_by=f"suite {who!r}")


def record_provenance(store: RunStore, backend: Any, note: Callable[[str], None] | None = None) -> str:
    """Store the backend's provenance (weights, revision, template) once, and this process's session
    (``runs.session``: torch threads, environment, commit); the provenance id ('' without one).

    When the store holds the same weights loaded the same way from another folder (another
    ``$TAMPERBENCH_HOME``, a moved cache), the backend takes that stored record, so the run resumes
    under the id its stored records carry instead of redoing them under a new one."""
    prov = getattr(backend, "provenance", None)
    if prov is None:
        return ""
    from tamperbench.store.moved import provenance_moved

    moved = provenance_moved(store, prov)
    if moved is not None:
        same = type(prov).model_validate(moved)
        if same.id != prov.id:
            backend.provenance = same
            if note is not None:
                note(f"same weights (sha256 {prov.sha256[:12]}) as the stored provenance {same.id}, read from "
                     f"{prov.resolved_path} instead of {same.resolved_path}: resuming under {same.id}")
    pid = store.put_provenance(backend.provenance)
    from tamperbench.runs.session import session_record
    from tamperbench.store.sessions import put_session

    put_session(store, session_record(pid))  # threads, environment, commit: what the id leaves out
    return pid


def execute(store: RunStore, units: Sequence[WorkUnit], worker: tuple[str, str], config: Any, *,
            executor: Executor | None = None, context: Any = None, live: Live | None = None,
            on_batch: Callable[[list[Finished], CommitReport], None] | None = None) -> CommitReport:
    """Run ``worker`` over ``units`` (in this process on ``context`` unless ``executor`` is given) and
    commit each finished batch; the executing step of :func:`run`, for services that drive their own
    life cycle on another suite's run."""
    executor = executor or InProcessExecutor(context, live=live)
    return commit(store, executor.execute(list(units), Worker(*worker, config=config)), on_batch=on_batch)


def _execute_with_bar(defn: SuiteDef, spec: Any, store: RunStore, planned: Planned, config: Any, context: Any,
                      executor: Executor | None, console: Console, progress: bool) -> tuple[CommitReport, int, int]:
    from tamperbench.progress import ETA_FIELDS, BarEta, progress_bar

    bound = sum(int(defn.row_tokens(spec, u)) for u in planned.units) if defn.row_tokens is not None else 0
    countdown = BarEta(bound)  # the --dry-run's bound, at this run's rate
    weight = defn.weight or (lambda _: 1)
    shown = tuple(f"{{task.fields[{k}]}} {k}" for k in defn.shown)
    with progress_bar(defn.name, *shown, *ETA_FIELDS, unit=defn.unit, console=console, disable=not progress) as bar:
        start: dict[str, Any] = {**dict.fromkeys(defn.shown, 0), **countdown.fields()}  # rich's task fields
        task = bar.add_task(planned.label, total=planned.total, completed=planned.done, **start)
        countdown.attach(bar, task)

        def live(stats: dict) -> None:  # the worker's running counters, after every decoding step
            fields: dict[str, Any] = {k: stats[k] for k in defn.shown if k in stats}
            bar.update(task, **fields)
            if "tokens" in stats:
                countdown.update(int(stats["tokens"]))

        def on_batch(batch: list[Finished], report: CommitReport) -> None:  # a committed batch
            fields: dict[str, Any] = {k: report.stats[k] for k in defn.shown}
            bar.update(task, advance=sum(weight(f) for f in batch), **fields)
            countdown.update(max(countdown.tokens, int(report.stats["tokens"])))

        report = execute(store, planned.units, defn.worker, config, executor=executor, context=context,
                         live=live, on_batch=on_batch)
    return report, bound, countdown.tokens


def run(defn: SuiteDef, spec: Any, out: str | Path, *, new: bool = False, backend: Any = None,
        executor: Executor | None = None, console: Console | None = None, progress: bool = True) -> RunResult:
    """Run (or resume) ``spec`` into run directory ``out`` (see the module docstring for the order).
    ``backend``: an already loaded backend for the (single) model, instead of loading it."""
    console = console or Console(stderr=True)
    if defn.prepare is not None:
        spec = defn.prepare(spec)
    if defn.preflight is not None:
        defn.preflight(spec)
    RunStore.preflight(out, spec, new=new)  # a bad --out costs no model load
    models = defn.model_names(spec)
    result = RunResult(str(out), spec)
    store: RunStore | None = None
    try:
        for model in models:
            loaded = backend if backend is not None and len(models) == 1 else defn.load(spec, model)
            check_capabilities(loaded, defn.needs, defn.name)  # one line, before any compute
            if defn.check is not None:
                defn.check(spec, loaded, model)
            context = defn.context(spec, loaded, console) if defn.context is not None else RunContext(spec, loaded, model)
            result.contexts[model] = context
            if store is None:
                store = RunStore.open(out, spec, new=new)
                if defn.on_open is not None:
                    defn.on_open(spec, store)
                for table, shape in defn.tables:
                    store.ensure_table(table, shape)
            loaded_id = getattr(getattr(loaded, "provenance", None), "id", "")
            pid = record_provenance(store, loaded, console.print)
            if pid != loaded_id and executor is not None:  # remote workers load (and key) on their own
                raise UserError(f"{out}: its records were made from the same weights read from "
                                f"{loaded.provenance.resolved_path}; run with the TAMPERBENCH_HOME (model cache) "
                                f"that holds that path, or in-process, so remote workers key trials as stored")
            planned = defn.plan(spec, store, pid, model)
            result.total += planned.total
            result.done += planned.done
            if not planned.units:
                console.print(f"nothing to do: all {planned.total} {defn.unit} of this spec are stored in {out}"
                              + (f" ({model})" if len(models) > 1 else ""))
                continue
            config = defn.config(spec, model) if defn.config is not None else spec
            t0 = time.perf_counter()
            report, bound, tokens = _execute_with_bar(defn, spec, store, planned, config, context, executor,
                                                      console, progress)
            result.seconds += time.perf_counter() - t0
            result.units += report.units
            result.written.update(report.written)
            result.stats.update(report.stats)
            result.row_tokens += bound
            result.tokens += max(tokens, int(report.stats["tokens"]))
        if defn.finish is not None and store is not None:
            defn.finish(spec, store, result)
    finally:
        if store is not None:
            store.close()
    return result


def dry_run(defn: SuiteDef, spec: Any, out: str | Path, echo: Callable[[str], None] = print, *,
            backend: Any = None) -> Any:
    """``--dry-run``: the suite's ``estimate`` of the pending work against ``out`` (nothing created),
    calibrated on the first model and printed with an ETA; returns the ``estimate.Plan``."""
    from tamperbench.estimate import dry_run as print_dry_run

    if defn.estimate is None:
        raise UserError(f"suite {defn.name!r} registers no plan: --dry-run is not available for it")
    if defn.prepare is not None:
        spec = defn.prepare(spec)
    models = defn.model_names(spec)
    if backend is None and models:
        backend = defn.load(spec, models[0])
    plan = defn.estimate(spec, out, backend)
    return print_dry_run(plan, backend, echo, calibration=defn.calibrate and backend is not None)


def definition(suite: Any) -> SuiteDef | None:
    """A registered suite's :class:`SuiteDef` (``Suite.definition``), or None for a suite registered
    with a bare ``runner`` function."""
    ref = getattr(suite, "definition", None)
    if ref is None:
        return None
    defn = suite.part("definition")
    if not isinstance(defn, SuiteDef):
        raise UserError(f"suite {suite.name!r} definition: expected a tamperbench.runs.driver.SuiteDef, "
                        f"got {type(defn).__name__}")
    return defn


def run_registered(suite: Any, spec: Any, out: str | Path, *, new: bool = False, executor: Executor | None = None,
                   console: Console | None = None) -> Any:
    """Run a registered suite (a :class:`tamperbench.suites.Suite`) through the driver. A suite
    registered only with a ``runner`` function (a third-party suite written before the driver) is
    called as before; it runs in this process only."""
    defn = definition(suite)
    if defn is not None:
        return run(defn, spec, out, new=new, executor=executor, console=console)
    if executor is not None:
        raise UserError(f"--executor: suite '{suite.name}' runs in-process only")
    return suite.run(spec, out, new=new)


def dry_run_registered(suite: Any, spec: Any, out: str | Path, echo: Callable[[str], None] = print) -> Any:
    """``--dry-run`` of a registered suite: its definition's estimate, else its registered ``plan``."""
    defn = definition(suite)
    if defn is not None:
        return dry_run(defn, spec, out, echo)
    if suite.plan is None:
        raise UserError(f"suite {suite.name!r} registers no plan: --dry-run is not available for it")
    from tamperbench.estimate import dry_run_spec

    return dry_run_spec(suite, spec, out, echo=echo)
