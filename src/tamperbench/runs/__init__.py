"""The run layer: the run driver (:mod:`tamperbench.runs.driver`) and what it runs on.

A suite declares its parts in a :class:`~tamperbench.runs.driver.SuiteDef` and the driver owns the
life cycle: preflight, load, capability check, store, provenance, then

1. *plan*: the suite's pending :class:`WorkUnit` list (keyed as the stored records are, so stored
   work is skipped);
2. *execute*: an :class:`Executor` runs a :class:`Worker` (import strings + a picklable config, so
   another process can rebuild it) over the units and yields batches of :class:`Finished` units;
   :class:`InProcessExecutor` is the default (on the backend the driver loaded),
   :mod:`tamperbench.runs.ray_executor` spreads units over Ray actors;
3. *commit*: :func:`commit` writes each finished batch to the run store from the driver process,
   the store's only writer.

Suites import the driver, never the executors or the commit loop (an import-linter contract).
"""

from tamperbench.runs.commit import CommitReport, commit
from tamperbench.runs.executor import Executor, InProcessExecutor, Worker
from tamperbench.progress import progress_bar
from tamperbench.runs.units import Finished, WorkUnit

__all__ = ["CommitReport", "Executor", "Finished", "InProcessExecutor", "Worker", "WorkUnit", "commit",
           "progress_bar"]
