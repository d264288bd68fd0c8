"""The unit of work and its result: plain, picklable data that can cross a process boundary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class WorkUnit:
    """One piece of pending work. ``key`` is the store key it will produce (or a key that names the
    group of records it produces); ``payload`` is everything the worker needs, picklable."""

    key: str
    payload: Any


@dataclass
class Finished:
    """A finished unit: the records to store, by table (written in this order), and counters for
    the driver's progress display (e.g. ``{"swaps": 3, "tokens": 512}``)."""

    key: str
    records: dict[str, list[BaseModel]] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
