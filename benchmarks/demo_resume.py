"""Time ``tamperbench demo``'s resume path over a demo folder a first run left.

    python benchmarks/demo_resume.py --out runs/demo [--steps N]

Runs the demo's first N steps (default: all) through ``run_steps`` with the CLI app wrapped to count
the commands a step reaches (0 when every step resumed), then prints the step table and the count.
"""

from __future__ import annotations

import argparse
import time

W0 = time.perf_counter()

from pathlib import Path  # noqa: E402

from rich.console import Console  # noqa: E402

from tamperbench.cli import app  # noqa: E402
from tamperbench.cli.demo import demo_steps  # noqa: E402
from tamperbench.cli.demo_steps import cpu_seconds, run_steps, step_table  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="A demo folder a first `tamperbench demo` left.")
    ap.add_argument("--steps", type=int, default=None, help="Only the first N steps.")
    ap.add_argument("--model", default="embedded")
    args = ap.parse_args()
    calls: list[list[str]] = []

    def counting(argv, **kw):
        calls.append(argv)
        return app(argv, **kw)

    rows = run_steps(counting, demo_steps(args.out, args.model)[: args.steps], args.out, Console())
    Console().print(step_table(rows, time.perf_counter() - W0, cpu_seconds()))
    print(f"commands reached: {len(calls)}; wall {time.perf_counter() - W0:.2f} s, CPU {cpu_seconds():.2f} s "
          "(the whole process, imports included)")


if __name__ == "__main__":
    main()
