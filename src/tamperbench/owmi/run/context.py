"""What a run's steps share: the worker's context (what is running) and the report of what was done."""

from __future__ import annotations

from dataclasses import dataclass
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
