"""What one OWMI unit -- (cell, item, seed) -- shares across its conditions, whichever engine runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from tamperbench.owmi.engine import contexts as cx
from tamperbench.owmi.engine.objects import ObjectSpec, Target
from tamperbench.owmi.engine.operators import OperatorSpec

MODEL_CONDITIONS = ("intervention", "sham", "random_unit", "random_matched")
# The baseline's teacher-forced log-probs are kept for reuse by every condition's JS (and every
# calibration step) only while they fit this budget (positions x vocabulary x 4 bytes: ~340
# positions of a 49k vocabulary). Longer sequences stream the baseline alongside each intervened
# pass instead (one more forward, identical numbers), so memory never grows with length x vocab.
BASELINE_KEEP_BYTES = 64 * 2**20


@dataclass
class Cell:
    model: str
    benchmark: str
    obj: ObjectSpec
    op: OperatorSpec


@dataclass
class Unit:
    """Everything one (cell, item, seed) shares across its conditions."""

    cell: Cell
    item: Any  # BenchItem
    index: int  # item index within the benchmark (cycles the concept)
    seed: int
    target: Target
    rtarget: Target
    concept: str | None
    direction: torch.Tensor | None
    reference: torch.Tensor | None
    u: torch.Tensor
    task: cx.Context
    base_ids: list[int]
    norm_unit: float = 0.0
    eta: float | None = None
    match: tuple[float, float] | None = None
    effects: dict[str, dict] = field(default_factory=dict)
    gens: dict[str, tuple] = field(default_factory=dict)
    base_chunks: list | None = None  # baseline teacher-forced log-probs, shared by every condition's JS
    # (None when over BASELINE_KEEP_BYTES: then streamed alongside each intervened pass)
    base_answer_lp: float | None = None
    task_rows: Any = None  # batched engine: the task answered under every condition (ragged.Rows)
    system: str | None = None  # the system message of every context built for this unit (None: none given)
