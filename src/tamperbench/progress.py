"""The one progress-bar builder (suites, runners), so all bars look alike and all can be switched off the same
way. Top level, not under a suite: every suite's runner and ``runs/`` use it. ``models/`` does not (the model
layer reports progress through a callback, ``models.protocols.GenerationProgress``); a runner that wants a
bar for a generation call subscribes one.

:func:`countdown` finds a suite's row-token model through the registry (:mod:`tamperbench.suites`), so a
bar counts down from the same bound as that suite's ``--dry-run`` without this module knowing the suite."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TaskID, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text

from tamperbench.estimate import EtaTracker

ETA_FIELDS = ("{task.fields[tok]} tok", "{task.fields[eta]}")  # a bar's columns for a BarEta's fields


class RateColumn(ProgressColumn):
    """Completed units per second, e.g. ``1.25 trials/s`` (rich's own speed estimate)."""

    def __init__(self, unit: str):
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        return Text(f"{task.speed:.2f} {self.unit}/s" if task.speed else f"- {self.unit}/s")


def progress_bar(label: str, *fields: str | ProgressColumn, unit: str | None = None,
                 console: Console | None = None, disable: bool = False) -> Progress:
    """``label`` bar, done/total, extra ``fields`` (format strings over task fields, or columns),
    a rate column when ``unit`` is given, elapsed and remaining time."""
    columns: list[str | ProgressColumn] = [TextColumn(f"[bold]{label}[/bold] {{task.description}}"), BarColumn(),
                                           MofNCompleteColumn()]
    columns += [TextColumn(f) if isinstance(f, str) else f for f in fields]
    if unit is not None:
        columns.append(RateColumn(unit))
    columns += [TimeElapsedColumn(), TimeRemainingColumn()]
    return Progress(*columns, console=console, disable=disable)


class BarEta:
    """A bar's ``tok`` and ``eta`` fields (``ETA_FIELDS``): tokens decoded so far against the dry
    run's decode bound, and ``estimate.EtaTracker``'s remaining time on the bar's own clock.

    Why: rich's remaining time extrapolates finished units, which arrive in bursts (a generation
    call, an OWMI unit of minutes); the tracker counts down the same token bound ``--dry-run``
    prints, at the rate this run has achieved. The Sleight of Word bar feeds its tracker the same way."""

    def __init__(self, row_tokens: int):
        self.tracker = EtaTracker(row_tokens)
        self.tokens = 0
        self.t0 = time.perf_counter()
        self.bar: tuple[Progress, TaskID] | None = None

    def attach(self, progress: Progress, task: TaskID) -> None:
        self.bar = (progress, task)

    def fields(self) -> dict[str, Any]:  # rich's task fields (**Any)
        return {"tok": self.tracker.tokens_text(self.tokens),
                "eta": self.tracker.text(self.tokens, time.perf_counter() - self.t0)}

    def update(self, tokens: int) -> None:
        """``tokens``: decoded so far (counted as the bound counts them)."""
        self.tokens = tokens
        if self.bar is not None:
            self.bar[0].update(self.bar[1], **self.fields())

    def add(self, tokens: int) -> None:
        self.update(self.tokens + tokens)


def countdown(suite: str, spec, units) -> BarEta:
    """A :class:`BarEta` counting down from the decode bound of ``units`` (pending work units of
    ``spec``) under suite ``suite``'s registered row-token model: the number its dry run prints."""
    from tamperbench.suites import get_suite

    return BarEta(get_suite(suite).row_tokens_for(spec, units))
