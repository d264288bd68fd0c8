"""The one timing harness of ``benchmarks/``: baseline against candidate(s), in one process, on one
thread, over rotated rounds; medians, ratios, the load average and the machine, printed alike.

Why one harness: the machine these figures come from is shared (2 cores, other jobs), so a figure
is only as good as its controls. Every script here times its arms the same way:

* one process, one thread (``torch.set_num_threads(1)`` and the BLAS/OpenMP variables, set before
  numpy or torch start their pools), so arms compete for the same core and nothing else changes;
* rounds, each running every arm once, in an order rotated from round to round (round ``r`` starts
  at arm ``r mod n``), so drift in the machine's load hits every arm alike; the figure is the
  median over rounds, with the per-round ratio's median beside it (load that drifts over seconds
  cancels inside a round);
* the load average before and after, and the machine (CPU, cores, Python, torch, threads) printed
  beside the numbers, so a reader can judge them.

A script states only its workload: ``Arm(name, fn)``, where ``fn()`` does the work once and returns
the work done (tokens, records, bytes, or None when time is the figure), then calls :func:`compare`
and :func:`report`. ``--rounds`` / ``--threads`` / ``--quick`` come from :func:`parser`.

    from _harness import Arm, compare, parser, report, single_thread
    single_thread()
    args = parser(__doc__).parse_args()
    result = compare([Arm("loop", slow), Arm("vectorised", fast)], rounds=args.rounds)
    report(result, unit="replicates")
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def single_thread(threads: int = 1) -> None:
    """Run on ``threads`` threads: the BLAS/OpenMP variables (for pools not started yet), the pools
    already loaded (threadpoolctl, as scikit-learn does it), and torch's own setting."""
    for var in THREAD_VARS:
        os.environ[var] = str(threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(limits=threads)  # stays in force: not used as a context manager
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


def machine() -> str:
    """One line: CPU, cores, Python, torch (and its threads) when imported."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    parts = [cpu, f"{os.cpu_count()} cores", f"Python {platform.python_version()}"]
    torch = sys.modules.get("torch")
    if torch is not None:
        parts.append(f"torch {torch.__version__} on {torch.get_num_threads()} thread(s)")
    return "; ".join(parts)


def load_average() -> float:
    return os.getloadavg()[0]


@dataclass
class Arm:
    """One way of doing the workload: ``fn()`` does it once and returns the work done (or None)."""

    name: str
    fn: Callable[[], float | int | None]


@dataclass
class ArmResult:
    name: str
    seconds: list[float] = field(default_factory=list)
    work: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def rate(self) -> float | None:
        """Median work per second over the rounds (None when the arm reports no work)."""
        if not self.work:
            return None
        return statistics.median(w / max(s, 1e-12) for w, s in zip(self.work, self.seconds))


@dataclass
class Result:
    arms: list[ArmResult]
    rounds: int
    load_before: float
    load_after: float
    machine: str
    orders: list[list[str]] = field(default_factory=list)

    @property
    def baseline(self) -> ArmResult:
        return self.arms[0]

    def ratio(self, name: str) -> float:
        """The arm against the baseline, per round, median over rounds (above 1: the arm is faster): the
        ratio of work rates when both report work (arms may do different amounts), else of seconds."""
        arm, base = next(a for a in self.arms if a.name == name), self.baseline
        if arm.work and base.work:
            return statistics.median((w / max(s, 1e-12)) / (bw / max(bs, 1e-12))
                                     for w, s, bw, bs in zip(arm.work, arm.seconds, base.work, base.seconds))
        return statistics.median(b / max(s, 1e-12) for b, s in zip(base.seconds, arm.seconds))


def compare(arms: list[Arm], *, rounds: int = 3, warmup: bool = True,
            clock: Callable[[], float] = time.perf_counter) -> Result:
    """Time every arm once per round, the order rotated each round; the first arm is the baseline.
    ``warmup``: run each arm once untimed first (allocators, kernels, caches)."""
    if not arms:
        raise ValueError("compare: no arms")
    if rounds < 1:
        raise ValueError(f"compare: rounds must be at least 1, got {rounds}")
    out = [ArmResult(a.name) for a in arms]
    before = load_average()
    if warmup:
        for a in arms:
            a.fn()
    orders = []
    for r in range(rounds):
        order = [(r + k) % len(arms) for k in range(len(arms))]
        orders.append([arms[i].name for i in order])
        for i in order:
            t0 = clock()
            work = arms[i].fn()
            out[i].seconds.append(clock() - t0)
            if work is not None:
                out[i].work.append(float(work))
    return Result(out, rounds, before, load_average(), machine(), orders)


def report(result: Result, *, unit: str | None = None, echo: Callable[[str], None] = print) -> None:
    """The figures as plain lines: machine and load, then per arm its median time (and rate), and
    its ratio to the baseline (first arm)."""
    echo(f"machine: {result.machine}")
    echo(f"load average: {result.load_before:.2f} before, {result.load_after:.2f} after; "
         f"{result.rounds} rotated round(s), medians")
    width = max(len(a.name) for a in result.arms)
    for a in result.arms:
        rate = a.rate
        line = f"{a.name:<{width}}  {a.median:9.3f} s"
        if rate is not None:
            line += f"  {rate:10.4g} {unit or 'units'}/s"
        if a is not result.baseline:
            line += f"  x{result.ratio(a.name):.2f} vs {result.baseline.name}"
        echo(line)


def parser(doc: str | None, *, rounds: int = 3) -> argparse.ArgumentParser:
    """``--rounds``, ``--threads`` and ``--quick``, plus the script's own options added by the caller."""
    ap = argparse.ArgumentParser(description=(doc or "").strip().split("\n")[0])
    ap.add_argument("--rounds", type=int, default=rounds, help=f"rotated rounds (default {rounds})")
    ap.add_argument("--threads", type=int, default=1, help="threads (default 1: arms share one core)")
    ap.add_argument("--quick", action="store_true", help="a smaller workload, for a smoke run")
    return ap
