"""Compatibility re-export: the step decoder now lives in :mod:`tamperbench.models.decoding`."""

from tamperbench.models.decoding.decoder import StepDecoder
from tamperbench.models.decoding.rows import RowSnapshot, StepResult

__all__ = ["RowSnapshot", "StepDecoder", "StepResult"]
