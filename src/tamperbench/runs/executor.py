"""Executors run a worker over work units and yield batches of finished units as they complete.

A :class:`Worker` is described by import strings plus a picklable ``config`` (the run spec), so an
executor in another process -- a Ray actor, later -- can rebuild it: ``setup(config)`` makes the
per-process context (loads the model once), ``work(context, units, live)`` yields lists of
:class:`Finished` units (the units that finished together: a question, a generation chunk).
``live`` receives the worker's running counters after each step for a progress display; an
executor that cannot forward them passes ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tamperbench.runs.units import Finished, WorkUnit
from tamperbench.registry import load_object

Live = Callable[[dict], None]


@dataclass(frozen=True)
class Worker:
    """What runs the units: ``"module:function"`` strings and the config handed to ``setup``."""

    setup: str  # setup(config) -> context
    work: str  # work(context, units: list[WorkUnit], live: Live | None) -> Iterator[list[Finished]]
    config: Any = None

    def make_context(self) -> Any:
        return load_object(self.setup, "worker setup")(self.config)

    def run(self, context: Any, units: list[WorkUnit], live: Live | None = None) -> Iterator[list[Finished]]:
        return load_object(self.work, "worker work")(context, units, live)


class Executor(Protocol):
    def execute(self, units: Sequence[WorkUnit], worker: Worker) -> Iterator[list[Finished]]:
        """Run ``worker`` over ``units``; yield each batch of finished units as it completes."""
        ...


class InProcessExecutor:
    """Runs the worker here, on ``context`` when given (the backend the driver already loaded)."""

    def __init__(self, context: Any = None, live: Live | None = None):
        self.context = context
        self.live = live

    def execute(self, units: Sequence[WorkUnit], worker: Worker) -> Iterator[list[Finished]]:
        if not units:
            return
        context = self.context if self.context is not None else worker.make_context()
        yield from worker.run(context, list(units), self.live)
