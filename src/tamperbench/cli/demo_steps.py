"""The bookkeeping of ``tamperbench demo``: per-step timing (wall and CPU), a resume stamp per step,
and the closing step table.

A step is skipped on a rerun when the stamp it left names the same command line and its outputs are
byte-for-byte where that run left them (a fingerprint of every output file's path, size and
modification time, refreshed after each later step, since later steps add to earlier run folders). The
first step that does not match runs through its own CLI command, which resumes what its run directory
already holds, and every step after it runs too. A skipped step replays what it printed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

STAMPS = ".demo-steps.json"
# `make demo` passes its install step's seconds here, only when that run installed (the Makefile's
# install step writes them to .venv/.install-seconds; the demo target reads and removes the file).
INSTALL_ENV = "TAMPERBENCH_INSTALL_SECONDS"


@dataclass
class Step:
    title: str
    argv: list[str]
    outputs: list[Path]  # files or folders the step writes (its fingerprint); empty: nothing to find later


def cpu_seconds() -> float:
    """user + system CPU of this process and of the children it waited for."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def fingerprint(paths: list[Path], skip: Path | None = None) -> str | None:
    """sha256 over (path, size, mtime_ns) of every file under ``paths``; None when one is missing."""
    h = hashlib.sha256()
    for p in paths:
        if not p.exists():
            return None
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
        for f in files:
            if skip is not None and f == skip:
                continue
            st = f.stat()
            h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def step_key(step: Step) -> str:
    from tamperbench import __version__

    return hashlib.sha256(json.dumps([__version__, step.argv]).encode()).hexdigest()[:16]


class Tee(io.TextIOBase):
    """Writes go to the real stdout and to a buffer (what a skipped step replays)."""

    def __init__(self, real):
        self.real, self.buf = real, io.StringIO()

    def write(self, s: str) -> int:
        self.real.write(s)
        self.buf.write(s)
        return len(s)

    def flush(self) -> None:
        self.real.flush()

    def isatty(self) -> bool:
        return self.real.isatty()

    def fileno(self) -> int:
        return self.real.fileno()


class Stamps:
    """``OUT/.demo-steps.json``: per step key, its fingerprint, first-run times and printed text."""

    def __init__(self, out: Path):
        self.path = out / STAMPS
        try:
            self.data: dict = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.data = {}

    def matches(self, step: Step) -> bool:
        got = self.data.get(step_key(step))
        return got is not None and got.get("fingerprint") == fingerprint(step.outputs, self.path)

    def record(self, step: Step, wall: float, cpu: float, text: str) -> None:
        self.data[step_key(step)] = {"argv": step.argv, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "text": text,
                                     "fingerprint": None}

    def refresh(self, done: list[Step]) -> None:
        """Fingerprint every finished step's outputs as they are now, and save."""
        from tamperbench.safeio.files import atomic_write

        for s in done:
            if step_key(s) in self.data:
                self.data[step_key(s)]["fingerprint"] = fingerprint(s.outputs, self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(self.data, indent=1))

    def first(self, step: Step) -> dict:
        return self.data.get(step_key(step), {})


def run_steps(app, steps: list[Step], out: Path, console) -> list[dict]:
    """Run or resume each step; one row per step for the table. The steps share one loaded model
    (``shared_backends``): each command would otherwise load it again."""
    from tamperbench.models.registry import shared_backends

    with shared_backends():
        return _run_steps(app, steps, out, console)


def _run_steps(app, steps: list[Step], out: Path, console) -> list[dict]:
    from rich.rule import Rule

    stamps, done, rows, resuming = Stamps(out), [], [], True
    for step in steps:
        cmd = f"tamperbench {' '.join(step.argv)}"
        resuming = resuming and stamps.matches(step)
        w0, c0 = time.perf_counter(), cpu_seconds()
        if resuming:
            console.print(Rule(f"[bold]{step.title}[/bold]  (resumed: {cmd})"))
            sys.stdout.write(stamps.first(step).get("text", ""))
            sys.stdout.flush()
        else:
            console.print(Rule(f"[bold]{step.title}[/bold]  ({cmd})"))
            tee, real = Tee(sys.stdout), sys.stdout
            sys.stdout = tee
            try:
                app(step.argv, standalone_mode=False)
            finally:
                sys.stdout = real
            stamps.record(step, time.perf_counter() - w0, cpu_seconds() - c0, tee.buf.getvalue())
        wall, cpu = time.perf_counter() - w0, cpu_seconds() - c0
        done.append(step)
        stamps.refresh(done)
        first = stamps.first(step)
        rows.append({"step": step.title.split(" (")[0], "resumed": resuming, "wall_s": wall, "cpu_s": cpu,
                     "first_wall_s": first.get("wall_s"), "first_cpu_s": first.get("cpu_s")})
    return rows


def install_seconds() -> float | None:
    """The install time of this `make demo`, when it installed (else None)."""
    raw = os.environ.get(INSTALL_ENV, "").strip()
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


def step_table(rows: list[dict], total_wall: float, total_cpu: float):
    """The closing table: this run's wall and CPU per step, and the first run's where a step resumed."""
    from rich.table import Table

    t = Table(title="demo steps (seconds; CPU = user + system of this process)")
    for col in ("step", "this run", "wall", "CPU", "first run wall", "first run CPU"):
        t.add_column(col, justify="left" if col in ("step", "this run") else "right")
    fmt = lambda x: "" if x is None else f"{x:.1f}"  # noqa: E731
    for r in rows:
        t.add_row(r["step"], "resumed" if r["resumed"] else "ran", fmt(r["wall_s"]), fmt(r["cpu_s"]),
                  fmt(r["first_wall_s"]), fmt(r["first_cpu_s"]))
    t.add_row("total (demo)", "", fmt(total_wall), fmt(total_cpu),
              fmt(sum(r["first_wall_s"] or 0 for r in rows)), fmt(sum(r["first_cpu_s"] or 0 for r in rows)))
    inst = install_seconds()
    if inst is not None:
        t.add_row("install (make demo's install step)", "ran", fmt(inst), "", "", "")
    return t
