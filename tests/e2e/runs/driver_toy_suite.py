"""A toy suite that declares only its parts (spec, table, plan, worker, loader, estimate) in one
:class:`~tamperbench.runs.driver.SuiteDef`; the run driver gives it everything else: ``tamperbench run``,
``--dry-run``, sweeps, resume, provenance, the bar and the executors (test_driver_toy_suite.py).

No model: the "backend" is a name with a provenance, and a unit squares its number. ``delay`` (seconds
per unit) lets a test kill a run mid-way; ``TOY_TRACE`` (a file) gets one line per unit a worker
finishes, with the worker's pid, so a test sees what ran where.
"""

from __future__ import annotations

import os
import time
from typing import Literal

import typer
from pydantic import BaseModel, Field

from tamperbench.estimate import Plan, open_read_only
from tamperbench.runs.driver import Planned, RunContext, SuiteDef
from tamperbench.runs.units import Finished, WorkUnit
from tamperbench.spec_base import FrozenSpec
from tamperbench.store import Record, trial_key
from tamperbench.suites import Suite

TABLE = "toy_rows"
app = typer.Typer(help="toy (driver)", no_args_is_help=True)


@app.command()
def hello() -> None:
    """Say hello."""
    print("hello from the driver toy")


@app.command()
def other() -> None:
    """A second command so typer keeps the group."""


class ToySpec(FrozenSpec):
    suite: Literal["toy-driver"] = "toy-driver"
    model: str = Field(default="toy-a", min_length=1)
    n: int = Field(default=6, ge=1, le=10_000)
    batch: int = Field(default=2, ge=1)
    delay: float = Field(default=0.0, ge=0, le=10)


class ToyRow(Record):
    model: str
    i: int
    square: int
    pid: int


class ToyProvenance(BaseModel):
    id: str
    source: str


class ToyBackend:
    """What the driver loads for a model: its provenance (nothing to decode)."""

    def __init__(self, model: str):
        self.model = model
        self.provenance = ToyProvenance(id=trial_key({"toy-model": model})[:16], source=model)


def load(spec: ToySpec, model: str) -> ToyBackend:
    return ToyBackend(model)


def unit_key(pid: str, i: int) -> str:
    return trial_key({"pid": pid, "i": i})


def plan(spec: ToySpec, store, pid: str, model: str) -> Planned:
    have = store.keys(TABLE)
    units = [WorkUnit(k, i) for i in range(spec.n) if (k := unit_key(pid, i)) not in have]
    return Planned(units, spec.n, spec.n - len(units))


def setup(spec: ToySpec) -> RunContext:
    """A worker in another process (a Ray actor) builds its context from the spec alone."""
    return RunContext(spec, ToyBackend(spec.model), spec.model)


def work(ctx: RunContext, units: list[WorkUnit], live=None):
    spec, backend = ctx.spec, ctx.backend
    trace = os.environ.get("TOY_TRACE")
    for start in range(0, len(units), spec.batch):
        chunk = units[start:start + spec.batch]
        time.sleep(spec.delay * len(chunk))
        if trace:
            with open(trace, "a") as f:
                f.writelines(f"{u.payload} {os.getpid()}\n" for u in chunk)
        if live is not None:
            live({"tokens": start + len(chunk)})
        yield [Finished(u.key, {TABLE: [ToyRow(key=u.key, provenance_id=backend.provenance.id, model=backend.model,
                                               i=u.payload, square=u.payload ** 2, pid=os.getpid())]},
                        {"tokens": 1, "squares": u.payload ** 2}) for u in chunk]


def estimate(spec: ToySpec, out, backend) -> Plan:
    store = open_read_only(out)
    try:
        planned = plan(spec, store, backend.provenance.id, backend.model)
    finally:
        store.close()
    return Plan("toy-driver", len(planned.units), planned.done, len(planned.units), 0, spec.batch, unit_name="squares",
                notes=["the driver toy's plan"])


SUITE = SuiteDef(name="toy-driver", spec=ToySpec, tables=((TABLE, ToyRow),), worker=(f"{__name__}:setup", f"{__name__}:work"),
                 plan=plan, load=load, row_tokens=lambda spec, unit: 1, estimate=estimate, calibrate=False,
                 unit="squares")

REGISTERED = Suite(name="toy-driver", help="The run driver's toy suite.", cli=f"{__name__}:app",
                   spec=f"{__name__}:ToySpec", definition=f"{__name__}:SUITE")
