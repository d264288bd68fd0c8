"""A roofline model of the swap engine's decode steps: how much model FLOP utilisation (MFU) a
batch profile allows at all on this machine, so a measured MFU can be read against what is possible.

Why: the project's speed target is MFU >= 0.7 on delivered trial tokens (trial tokens/s x 2 x parameters,
divided by a float32 1024^3 matmul's FLOP/s). A decode step reads every weight once whatever its
row count, so a step with few rows is bound by memory, not by the matmul ceiling; the target is
then a property of the workload's rows per step as much as of the code. This module turns the
engine's per-step row counts (``SwapEngine.stats["step_profile"]``) into two bounds:

* **overlap (optimistic)**: a step takes ``max(flop / peak, bytes / bandwidth)``, compute and
  memory traffic perfectly overlapped: the classic roofline.
* **no overlap (pessimistic)**: a step takes ``flop / peak + bytes / bandwidth``.

Per step, ``flop = rows x (flop_per_token + attention flop per context column x columns)`` and
``bytes = weight bytes + rows x columns x KV bytes per column`` (every weight read once: the tied
embedding counted once, as the output projection; every row reads its KV columns, padding
included, because batched attention does). ``peak`` is the matmul FLOP/s and ``bandwidth`` one
thread's read bandwidth (:func:`measure_bandwidth`), both measured in the same process.

Attainable MFU = delivered tokens x flop_per_token / peak / (bound's seconds); the engine's measured
MFU divided by it is the fraction of the attainable it reaches. :func:`fit_step_cost` fits the
measured forward seconds per step as ``fixed + per_row x rows + per_row_column x rows x columns``:
the fixed part is the weight traffic as the kernels really stream it, the per-row part the compute
as they really run it, the last the attention over the KV cache; ``(flop_per_token / peak) /
per_row`` is the MFU an unbounded batch of short contexts would tend to. On a shared machine the
fit is noisy: read it beside the bounds, not instead of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["Roofline", "StepCostFit", "attention_flop_per_column", "bound", "fit_step_cost", "kv_bytes_per_column",
           "measure_bandwidth", "mfu", "rows_needed", "weight_bytes"]


def mfu(tokens: float, seconds: float, flop_per_token: float, peak: float) -> float:
    """Model FLOP utilisation: tokens/s x FLOP per token / peak FLOP/s (the speed target's definition)."""
    return tokens / seconds * flop_per_token / peak


def weight_bytes(model) -> int:
    """Bytes of the model's parameters, each tensor once (``parameters()`` yields a tied weight once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _heads(config) -> tuple[int, int, int, int]:
    q = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or q
    d = getattr(config, "head_dim", None) or config.hidden_size // q
    return config.num_hidden_layers, q, kv, d


def kv_bytes_per_column(config, dtype_bytes: int = 4) -> int:
    """Bytes one row reads per context column in one forward: keys and values of every layer."""
    layers, _, kv, d = _heads(config)
    return 2 * layers * kv * d * dtype_bytes


def attention_flop_per_column(config) -> int:
    """FLOP of one query token against one context column: q.k and p.v, every query head, every layer."""
    layers, q, _, d = _heads(config)
    return 4 * layers * q * d


def measure_bandwidth(nbytes: int = 512 * 2**20, reps: int = 3) -> float:
    """One thread's read bandwidth now, bytes/s: the best of ``reps`` timed ``torch.sum`` over a
    float32 tensor of ``nbytes`` (default 512 MiB, 16x this machine's 32 MiB last-level cache, so
    it streams from memory as the weights do). Uses torch's current thread count."""
    import torch

    x = torch.ones(nbytes // 4)
    x.sum()  # touch every page first
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return x.numel() * 4 / best


@dataclass(frozen=True)
class Roofline:
    steps: int
    rows: int  # decoded token-rows
    seconds_overlap: float  # sum over steps of max(flop / peak, bytes / bandwidth)
    seconds_no_overlap: float  # sum over steps of flop / peak + bytes / bandwidth
    flop: float
    bytes: float

    def attainable(self, tokens: float, flop_per_token: float, peak: float) -> tuple[float, float]:
        """Attainable MFU on ``tokens`` delivered: (overlap bound, no-overlap bound)."""
        return (mfu(tokens, self.seconds_overlap, flop_per_token, peak),
                mfu(tokens, self.seconds_no_overlap, flop_per_token, peak))


def bound(profile: dict[int, list[float]], *, flop_per_token: float, weight_bytes: float, kv_bytes_per_column: float,
          attention_flop_per_column: float, peak: float, bandwidth: float) -> Roofline:
    """The two roofline bounds over an engine step profile ``{rows: [steps, forward_seconds, columns_sum]}``
    (``columns_sum``: the context columns of those steps, summed; a step's rows all attend to them)."""
    t_over = t_sum = flop = nbytes = 0.0
    steps = rows = 0
    for r, (n, _secs, cols) in profile.items():
        n = int(n)
        mean_cols = cols / n if n else 0.0
        f = r * (flop_per_token + attention_flop_per_column * mean_cols)
        b = weight_bytes + r * mean_cols * kv_bytes_per_column
        t_over += n * max(f / peak, b / bandwidth)
        t_sum += n * (f / peak + b / bandwidth)
        flop += n * f
        nbytes += n * b
        steps += n
        rows += n * r
    return Roofline(steps, rows, t_over, t_sum, flop, nbytes)


@dataclass(frozen=True)
class StepCostFit:
    fixed: float  # seconds per step whatever its rows
    per_row: float  # seconds per row
    per_row_column: float = 0.0  # seconds per row and context column (attention over the KV cache)

    def limit_mfu(self, flop_per_token: float, peak: float) -> float:
        """The MFU a step of unbounded rows tends to (context columns left out): (flop_per_token / peak) / per_row."""
        return flop_per_token / peak / self.per_row if self.per_row > 0 else float("inf")

    def rows_for(self, target: float, flop_per_token: float, peak: float) -> float:
        """Rows every step would need for MFU ``target`` at this cost, context columns left out
        (inf: no batch reaches it)."""
        room = flop_per_token / peak - target * self.per_row
        return target * self.fixed / room if room > 0 else float("inf")


def fit_step_cost(profile: dict[int, list[float]], columns: bool = True) -> StepCostFit | None:
    """Least squares of forward seconds per step = fixed + per_row x rows (+ per_row_column x rows x
    columns with ``columns``), every step weighted alike (from the per-row-count sums and mean
    columns). Over an engine run the column term matters but is poorly determined (early steps have
    many rows and short contexts, late ones few rows and long ones); steps timed at one context
    length (``columns=False``) pin fixed and per-row cost down. None with too few distinct row
    counts or a degenerate design."""
    import numpy as np

    pts = [(r, n, s / n, c / n) for r, (n, s, c) in profile.items() if n]
    k = 3 if columns else 2
    if len(pts) < k:
        return None
    w = np.sqrt([n for _, n, _, _ in pts])
    x = np.array([[1.0, r, r * c][:k] for r, _, _, c in pts]) * w[:, None]
    y = np.array([t for _, _, t, _ in pts]) * w
    if np.linalg.matrix_rank(x) < k:
        return None
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    return StepCostFit(float(coef[0]), float(coef[1]), float(coef[2]) if columns else 0.0)


def rows_needed(target: float, *, flop_per_token: float, step_bytes: float, peak: float, bandwidth: float
                ) -> tuple[float, float]:
    """Rows every step would need for MFU ``target`` (every row a delivered token): (overlap bound:
    target x ridge rows, no-overlap bound: target / (1 - target) x ridge rows), where the ridge is
    the row count at which a step's compute time equals its weight-read time."""
    ridge = (step_bytes / bandwidth) / (flop_per_token / peak)
    return target * ridge, (target / (1 - target) * ridge if target < 1 else float("inf"))
