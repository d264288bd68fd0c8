"""The one object a run's steps share: what is running, where it is written, and how it is shown."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class OwmiContext:
    """What a worker holds: the spec, the loaded model under test, its tier-2 observers and its engine
    (built by ``validate.context``)."""

    spec: Any  # OwmiSpec
    backend: Any
    observers: list[tuple[str, Any]]
    engine: Any  # engine.base.Engine: batched or reference, picked once from the model


@dataclass
class RunReport:
    written: int = 0
    skipped_units: int = 0
    units: int = 0
    seconds: float = 0.0
    row_tokens: int = 0  # the decode bound the bars counted down from (owmi/run/plan.py's row-token model, every model)
    tokens: int = 0  # decoded, counted as that bound counts (each record's answer, each frame's task answers)


@dataclass(frozen=True)
class RunContext:
    """One model's part of a run: the spec, the loaded model and its engine, the store and the keys
    it holds, and the progress bar. Built per work unit by ``execute.work``; every step below it
    reads what it needs from here instead of a list of positional parameters."""

    spec: Any  # OwmiSpec
    model: str  # the spec's name of the model under test
    backend: Any  # its loaded backend
    observers: list[tuple[str, Any]]  # tier-2 observers (name, backend)
    engine: Any  # engine.base.Engine: batched or reference, picked once from the model
    store: Any  # store.RunStore
    provenance_id: str
    have: set = field(default_factory=set)  # keys already stored
    report: RunReport = field(default_factory=RunReport)
    bar: Any = None  # the rich progress bar and its task id
    task: Any = None
    countdown: Any = None  # progress.countdown: the ETA's token bound

    def say(self, what: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, what=what)

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.advance(self.task)
