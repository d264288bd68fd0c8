"""Plan -> execute -> commit: the one loop every suite runner goes through.

WHY: a runner used to own its loop (plan, decode, write), so there was no place where another
executor -- a Ray pool over several GPUs, a remote server -- could take the work. Now a runner

1. *plans*: builds the pending :class:`WorkUnit` list (keyed as the stored records are, so stored
   work is skipped);
2. hands the units to an :class:`Executor` with a :class:`Worker` (import strings + a picklable
   config, so another process can rebuild it), which yields batches of :class:`Finished` units;
3. *commits*: :func:`commit` writes each finished batch to the run store from the driver process,
   the store's only writer.

:class:`InProcessExecutor` is the default; it runs the worker in this process on an already loaded
backend.
"""

from tamperbench.runs.commit import CommitReport, commit
from tamperbench.runs.executor import Executor, InProcessExecutor, Worker
from tamperbench.progress import progress_bar
from tamperbench.runs.units import Finished, WorkUnit

__all__ = ["CommitReport", "Executor", "Finished", "InProcessExecutor", "Worker", "WorkUnit", "commit",
           "progress_bar"]
