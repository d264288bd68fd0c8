"""OWMI's engine: a unit's forwards under hooks, its read-outs and its teacher-forced effects.

Two engines (``base.py`` says what they share): :class:`~tamperbench.owmi.engine.batched.BatchedEngine`
(the conditions of a unit as rows of one ragged batch) and
:class:`~tamperbench.owmi.engine.reference.ReferenceEngine` (one condition at a time: the oracle, and
models with sliding-window attention). :func:`engine_for` picks one, once, from the model.
"""

from __future__ import annotations

from typing import Any


def engine_for(backend, spec, observers: list[tuple[str, Any]] | None = None):
    """The engine for ``backend``'s model: batched wherever ragged rows can express its attention
    (``ragged.supported``: no sliding window), else the reference engine."""
    from tamperbench.owmi.engine.batched import BatchedEngine
    from tamperbench.owmi.engine.ragged import supported
    from tamperbench.owmi.engine.reference import ReferenceEngine

    return (BatchedEngine if supported(backend.model) else ReferenceEngine)(backend, spec, observers)
