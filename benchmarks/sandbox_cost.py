"""What one sandboxed program costs: ``run_program`` on a trivial passing program (median of N), and the
cgroup's share of it (making, joining through the launcher shell, removing) against ``/bin/true`` alone.

    .venv/bin/python benchmarks/sandbox_cost.py [--n 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from tamperbench.tasks.scoring import cgroup
from tamperbench.tasks.scoring.sandbox import Limits, run_program

PROGRAM = "def f(x):\n    return x + 1\nassert f(1) == 2\n"


def median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    n = ap.parse_args().n
    run_program("pass")  # probes bubblewrap and the cgroup once
    print(f"run_program, sandboxed: {median_ms(lambda: run_program(PROGRAM), n):.1f} ms (median of {n})")
    print(f"run_program, --unsafe-no-sandbox: {median_ms(lambda: run_program(PROGRAM, Limits(sandboxed=False)), n):.1f} ms")
    where = cgroup.probe()
    if isinstance(where, str):
        print(f"no cgroup: {where}")
        return

    def joined() -> None:
        tree = cgroup.TreeCgroup(where, 1 << 30, 16)
        try:
            subprocess.run([*tree.launcher(), "/bin/true"], check=True)
        finally:
            tree.remove()

    print(f"cgroup made, joined by the launcher, removed, around /bin/true: {median_ms(joined, n):.1f} ms; "
          f"/bin/true alone: {median_ms(lambda: subprocess.run(['/bin/true'], check=True), n):.1f} ms")


if __name__ == "__main__":
    main()
