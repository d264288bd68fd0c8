"""Run (or resume) an OWMI spec into a run directory through the run driver (:mod:`tamperbench.runs.driver`):
its suite definition (``SUITE``) and :func:`run`, which ``owmi run`` and the known-positive check call.

Every part the driver calls lives in the module that does that job, so the run reads top-down in
the driver's order, one module after the other:

1. ``owmi/run/validate.py``: :func:`~tamperbench.owmi.run.validate.validate` (every check that reads
   configs, before any model loads) -> per model, once loaded, ``check_loaded`` -> ``context`` (its
   observers loaded and checked, its engine picked once);
2. ``owmi/run/plan.py``: ``open_store`` (an older table refused, the stored units counted) ->
   ``plan_frames`` (one work unit per cell and context frame, keyed before any compute, so a resume
   skips what is stored) -> ``frame_row_tokens`` (the bar's bound);
3. ``owmi/run/execute.py``: ``work`` per unit: prepare, impact-match (once per cell and frame,
   stored before the cell's records), effects, then the records batch by batch (``records`` ->
   ``owmi/run/record.py``), each batch committed by the driver -> ``finish`` (the tier-3
   classifier's rows).

Why context frames (``OwmiSpec.frames``): Track C's contexts carry no introspection system prompt
(by default), so its task turn -- and with it the baseline answer, the treatment's divergence and
the impact-matched norm -- differs from the other tracks'. A cell's units are prepared, calibrated
and run once per frame; record keys are unchanged, and every record names its ``system_prompt``.
A run directory written before that column existed is refused (its Track C records were made
under the introspection prompt), so old and new records never share a table.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path

from rich.console import Console

from tamperbench.owmi.protocol.records import RUNS_TABLE
from tamperbench.owmi.run import execute, plan, validate
from tamperbench.owmi.run.context import OwmiContext, RunReport
from tamperbench.owmi.run.spec import OwmiSpec
from tamperbench.runs.driver import Executor, SuiteDef
from tamperbench.runs.driver import run as drive
from tamperbench.store import RunStore

__all__ = ["SUITE", "OwmiContext", "RunReport", "run", "setup_worker", "work"]

setup_worker, work = validate.setup_worker, execute.work  # the worker, by the names runs have used

SUITE = SuiteDef(
    name="owmi", spec=OwmiSpec, tables=plan.TABLES,
    worker=("tamperbench.owmi.run.validate:setup_worker", "tamperbench.owmi.run.execute:work"),
    needs=("HookBackend", "ScoringBackend"), models=lambda s: s.models, config=lambda s, m: (s, m),
    preflight=validate.validate, check=validate.check_loaded, context=validate.context,
    on_open=plan.open_store, plan=plan.plan_frames, row_tokens=plan.frame_row_tokens, estimate=plan.run_plan,
    finish=execute.finish, unit="unit", weight=lambda f: int(f.stats.get("units", 0)))


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
