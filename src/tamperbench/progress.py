"""The one progress-bar builder (suites, runners, batched generation), so all bars look alike and all can be
switched off the same way. Top level, not under a suite or ``runs/``: ``models/`` uses it too."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text


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
