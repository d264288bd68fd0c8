"""Plans and ETAs: what a run will decode, what is stored already, and how long the rest will take.

Why: ``--preset paper`` is 10,100 trials x 256 tokens; on a 2-core CPU that is hours, on a GPU
minutes. A user should learn that before committing the machine, and the progress bar should
count down with the same arithmetic instead of rich's rate guess, which swings with batch
refills.

The cost model, kept deliberately small so it can be read and checked:

* a prefill token costs ``1 / prefill_tps`` seconds (prefill is compute-bound: one number);
* a decoding step of ``b`` rows costs ``step_a + step_b * b`` seconds (the fixed part is weights
  streaming and Python, the per-row part is the rows' matmuls), fitted from two batch sizes;
* a run of ``T`` row-tokens at batch ``B`` takes ``ceil(T / B)`` steps.

``calibrate`` measures the three numbers in a few forward passes on this machine with the loaded
model (``--dry-run`` prints them). Token counts are upper bounds: every answer is assumed to run
to its budget (EOS ends many earlier), so the ETA is an upper bound too and says so.

Only the generic parts live here. What a run will decode is the suite's own business: each suite
registers a ``plan`` (``plan(spec, out, backend) -> Plan``) and a ``row_tokens`` model (tokens per
work unit) in :mod:`tamperbench.suites`, in its own package (``sleight/plan.py``, ``quote/plan.py``,
``owmi/plan.py``); :func:`dry_run_spec` and the progress bars (:mod:`tamperbench.progress`) reach
them through the registry, so this module imports no suite.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

__all__ = ["Calibration", "EtaTracker", "NoStore", "Plan", "calibrate", "dry_run", "dry_run_spec", "format_seconds",
           "open_read_only", "print_plan", "spec_backend"]


@dataclass(frozen=True)
class Calibration:
    """Measured on this machine with the loaded model (seconds, tokens/s)."""

    prefill_tps: float
    step_a: float  # seconds per decoding step, fixed part
    step_b: float  # seconds per decoding step, per row
    seconds: float  # calibration wall time
    batch: int  # the largest batch measured
    low: int = 1  # the smaller batch measured: the per-row cost is the slope between ``low`` and ``batch``

    def step_seconds(self, rows: int) -> float:
        return self.step_a + self.step_b * max(1, rows)

    def decode_seconds(self, row_tokens: int, batch: int) -> float:
        """Seconds to decode ``row_tokens`` tokens spread over rows of a ``batch``-row decoder."""
        if row_tokens <= 0:
            return 0.0
        steps = math.ceil(row_tokens / max(1, batch))
        return steps * self.step_seconds(min(batch, row_tokens))

    def seconds_for(self, prefill_tokens: int, row_tokens: int, batch: int) -> float:
        return prefill_tokens / self.prefill_tps + self.decode_seconds(row_tokens, batch)


def calibrate(backend, *, batch: int | None = None, prompt_tokens: int = 128, context: int | None = None,
              steps: int = 3, probe_batch: int = 32) -> Calibration:
    """A few forward passes (seconds on an idle CPU): one prefill of a ``prompt_tokens``-token row
    (``context`` tokens when larger: the mean columns the run's decoding steps attend to), forked
    to 4 rows and then ``min(batch, probe_batch)`` rows, ``steps`` decoding steps timed at each; the
    per-row cost is the slope between the two, extrapolated linearly to the run's batch. Not from
    a 1-row step: the decoder runs one row through another kernel (unpacked linears,
    models/decoding/packed_linear.py) that costs about what 4 packed rows do, so a 1-vs-16 slope
    over a 16-token context came out near zero and a 128-row ``--preset paper`` plan promised
    several times its real speed. Runs of at most 4 rows fit from 1 row. Nothing is stored anywhere."""
    hi = max(2, min(int(batch or backend.max_batch_size), probe_batch))
    lo = 1 if hi <= 4 else 4
    n = max(prompt_tokens, int(context or 0))
    ids = backend.encode("The quick brown fox jumps over the lazy dog. " * (n // 8 + 1))[:n]
    t_start = time.perf_counter()
    dec = backend.step_decoder(capacity=hi)
    t0 = time.perf_counter()
    [rid] = dec.add_rows([ids])
    t_pre = time.perf_counter() - t0

    def timed_steps(rows: int) -> float:
        live = len(dec.live_rows())
        if rows > live:
            dec.fork(rid, rows - live)
        dec.step()  # the first step at a new size pays allocation
        t1 = time.perf_counter()
        for _ in range(steps):
            dec.step()
        return (time.perf_counter() - t1) / steps

    s_lo, s_hi = timed_steps(lo), timed_steps(hi)
    slope = max((s_hi - s_lo) / (hi - lo), 0.0)
    return Calibration(prefill_tps=len(ids) / max(t_pre, 1e-9), step_a=max(s_lo - slope * lo, 1e-6), step_b=slope,
                       seconds=time.perf_counter() - t_start, batch=hi, low=lo)


@dataclass
class Plan:
    """What a run will do. ``row_tokens``: tokens the decoder will emit (upper bound);
    ``prefill_tokens``: prompt tokens it will feed; ``units``: trials (or judgments, probes)."""

    suite: str
    units: int  # to do
    stored: int  # already in the run directory
    row_tokens: int
    prefill_tokens: int
    batch: int
    unit_name: str = "trials"
    notes: list[str] = field(default_factory=list)
    eta_seconds: float | None = None
    context: int | None = None  # mean columns a decoding step attends to (calibrated there)

    def with_eta(self, cal: Calibration) -> Plan:
        self.eta_seconds = cal.seconds_for(self.prefill_tokens, self.row_tokens, self.batch)
        return self

    def as_dict(self) -> dict:
        return asdict(self)


def format_seconds(s: float) -> str:
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h} h {m:02d} min" if h else (f"{m} min {sec:02d} s" if m else f"{sec} s")


def print_plan(plan: Plan, cal: Calibration | None, echo: Callable[[str], None] = print) -> None:
    """The ``--dry-run`` report (plain lines, so scripts can grep them)."""
    total = plan.units + plan.stored
    echo(f"plan: {plan.suite}: {total} {plan.unit_name} in the spec, {plan.stored} already stored, "
         f"{plan.units} to run")
    echo(f"tokens to decode: at most {plan.row_tokens:,} (every answer to its budget); "
         f"prompt tokens to prefill: {plan.prefill_tokens:,}; batch {plan.batch}")
    for note in plan.notes:
        echo(f"note: {note}")
    if cal is not None:
        echo(f"calibration ({cal.seconds:.1f} s on this machine): prefill {cal.prefill_tps:.0f} tokens/s, "
             f"a decoding step {cal.step_a * 1000:.0f} ms + {cal.step_b * 1000:.1f} ms per row "
             f"(fitted between {cal.low} and {cal.batch} rows; batch {plan.batch}: {plan.batch / cal.step_seconds(plan.batch):.0f} tokens/s)")
    if plan.eta_seconds is not None:
        echo(f"ETA: at most {format_seconds(plan.eta_seconds)} (upper bound from the calibration; "
             f"answers that stop early take less)")
    echo("dry run: nothing was decoded or stored")


class EtaTracker:
    """The progress bar's remaining time, from the plan's token count and the cost model.

    Until ``warmup`` seconds of decoding have passed the calibrated rate is used; after that, the
    rate this run has actually achieved (tokens/s so far), since load on a shared machine moves
    it. Remaining time = remaining row-tokens / rate (an upper bound, like the plan)."""

    def __init__(self, row_tokens: int, cal: Calibration | None = None, batch: int = 1, warmup: float = 10.0):
        self.row_tokens, self.cal, self.batch, self.warmup = row_tokens, cal, batch, warmup

    def remaining(self, tokens_done: int, seconds: float) -> float | None:
        left = max(self.row_tokens - tokens_done, 0)
        if seconds >= self.warmup and tokens_done > 0:
            return left / (tokens_done / seconds)
        if self.cal is not None:
            return self.cal.decode_seconds(left, self.batch)
        return None

    def text(self, tokens_done: int, seconds: float) -> str:
        r = self.remaining(tokens_done, seconds)
        return "eta -" if r is None else f"eta <= {format_seconds(r)}"

    def tokens_text(self, tokens_done: int) -> str:
        """``decoded/bound``: the bar shows the total its ETA counts down from (the plan's number)."""
        return f"{tokens_done:,}/{self.row_tokens:,}"


class NoStore:
    """Stands in for a run directory that does not exist yet: nothing stored."""

    def keys(self, table: str) -> set[str]:
        return set()

    def has_table(self, table: str) -> bool:
        return False

    def rows(self, table: str, where: str = "", params: list | None = None) -> list[dict]:
        return []

    def close(self) -> None:
        pass


def open_read_only(out):
    """The run directory's store, read-only, or an empty stand-in; a dry run never creates it."""
    from pathlib import Path

    from tamperbench.store import RunStore
    from tamperbench.store.run_store import DB_FILE, SPEC_FILE

    out = Path(out)
    if (out / SPEC_FILE).is_file() and (out / DB_FILE).is_file():
        return RunStore.open_existing(out, read_only=True)
    return NoStore()


def dry_run(plan: Plan, backend, echo: Callable[[str], None] = print, *, calibration: bool = True) -> Plan:
    """Calibrate on this machine, attach the ETA and print the plan: what ``--dry-run`` does.
    Any suite (OWMI included) builds its ``Plan`` and calls this."""
    cal = calibrate(backend, batch=plan.batch, context=plan.context) if calibration and plan.units else None
    if cal is not None:
        plan.with_eta(cal)
    print_plan(plan, cal, echo)
    return plan


def spec_backend(spec):
    """The backend a dry run calibrates on: the spec's ``model`` (or first of its ``models``), with
    its device, dtype, batch size and chat template where the spec has them; None when the spec
    names no model (the plan is printed without an ETA)."""
    models = getattr(spec, "models", None)
    model = models[0] if models else getattr(spec, "model", None)
    if not model:
        return None
    from tamperbench.models import load_backend

    kwargs = {k: getattr(spec, k) for k in ("device", "dtype", "batch_size", "chat_template") if getattr(spec, k, None)}
    return load_backend(model, **kwargs)


def dry_run_spec(suite, spec, out, echo: Callable[[str], None] = print, *, backend=None) -> Plan:
    """``--dry-run`` for any registered suite (a :class:`tamperbench.suites.Suite`): its ``plan``
    part counts the pending work of ``spec`` against run directory ``out`` (nothing created), then
    :func:`dry_run` calibrates and prints it."""
    backend = backend if backend is not None else spec_backend(spec)
    plan = suite.part("plan")(spec, out, backend)
    return dry_run(plan, backend, echo, calibration=backend is not None)


