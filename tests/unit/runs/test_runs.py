"""Plan -> execute -> commit with a real DuckDB run store and a worker named by import strings.

No model: the worker squares numbers. What is checked is the plumbing a Ray executor relies on:
units and workers survive pickling, a worker is rebuilt from its import strings and config alone,
finished batches are committed by the driver as they arrive, and an interrupted run keeps every
batch committed before the failure and resumes by planning only the missing keys.
"""

from __future__ import annotations

import pickle

import pytest

from tamperbench.runs import Finished, InProcessExecutor, Worker, WorkUnit, commit
from tamperbench.sleight.runner import WORKER as SLEIGHT_WORKER
from tamperbench.sleight.runner import QuestionWork
from tamperbench.spec_base import FrozenSpec
from tamperbench.store import Record, RunStore
from tamperbench.registry import load_object


class SquareSpec(FrozenSpec):
    batch: int = 2
    fail_at: int | None = None


class Square(Record):
    n: int
    square: int


def setup(spec: SquareSpec) -> dict:
    return {"spec": spec, "calls": []}


def work(ctx: dict, units: list[WorkUnit], live=None):
    spec = ctx["spec"]
    for start in range(0, len(units), spec.batch):
        chunk = units[start:start + spec.batch]
        ctx["calls"].append([u.payload for u in chunk])
        if spec.fail_at is not None and any(u.payload == spec.fail_at for u in chunk):
            raise RuntimeError("worker died")
        if live is not None:
            live({"done": start + len(chunk)})
        yield [Finished(u.key, {"squares": [Square(key=u.key, n=u.payload, square=u.payload ** 2)]}, {"sum": u.payload})
               for u in chunk]


ME = __name__  # the name pytest imported this module under: load_object finds it in sys.modules


def plan(store: RunStore, numbers: list[int]) -> list[WorkUnit]:
    have = store.keys("squares")
    return [WorkUnit(f"n{n}", n) for n in numbers if f"n{n}" not in have]


def test_units_and_workers_pickle_and_rebuild_from_names():
    unit = WorkUnit("k", QuestionWork("q001", "why?", "ck", ("scarf",), True, (1, 2)))
    assert pickle.loads(pickle.dumps(unit)) == unit
    worker = Worker(f"{ME}:setup", f"{ME}:work", SquareSpec(batch=3))
    again = pickle.loads(pickle.dumps(worker))
    assert again == worker and again.make_context()["spec"].batch == 3
    for ref in SLEIGHT_WORKER:  # the suites' workers are importable by name
        assert callable(load_object(ref))
    for ref in ("tamperbench.quote.runner:work", "tamperbench.judge.runner:setup_worker"):
        assert callable(load_object(ref))


def test_execute_then_commit_in_batches(tmp_path):
    spec = SquareSpec(batch=2)
    seen = []
    with RunStore.open(tmp_path / "run", spec) as store:
        units = plan(store, [1, 2, 3, 4, 5])
        live = []
        executor = InProcessExecutor(live=live.append)  # no context: built from the worker's setup(config)
        report = commit(store, executor.execute(units, Worker(f"{ME}:setup", f"{ME}:work", spec)),
                        on_batch=lambda batch, rep: seen.append((len(batch), rep.written["squares"])))
        rows = {r["n"]: r["square"] for r in store.rows("squares")}
    assert seen == [(2, 2), (2, 4), (1, 5)]  # one commit per finished batch, in arrival order
    assert report.units == 5 and report.stats["sum"] == 15 and report.written["squares"] == 5
    assert rows == {1: 1, 2: 4, 3: 9, 4: 16, 5: 25}
    assert [d["done"] for d in live] == [2, 4, 5]


def test_interrupted_run_keeps_committed_batches_and_resumes(tmp_path):
    with RunStore.open(tmp_path / "run", SquareSpec()) as store:
        units = plan(store, [1, 2, 3, 4, 5])
        ctx = setup(SquareSpec(batch=2, fail_at=4))
        with pytest.raises(RuntimeError, match="worker died"):
            commit(store, InProcessExecutor(ctx).execute(units, Worker(f"{ME}:setup", f"{ME}:work")))
        assert sorted(r["n"] for r in store.rows("squares")) == [1, 2]  # the batch before the failure
        todo = plan(store, [1, 2, 3, 4, 5])
        assert [u.payload for u in todo] == [3, 4, 5]
        ctx = setup(SquareSpec(batch=2))
        commit(store, InProcessExecutor(ctx).execute(todo, Worker(f"{ME}:setup", f"{ME}:work")))
        assert ctx["calls"] == [[3, 4], [5]]
        assert sorted(r["n"] for r in store.rows("squares")) == [1, 2, 3, 4, 5]
        assert plan(store, [1, 2, 3, 4, 5]) == []


def test_nothing_pending_runs_no_worker(tmp_path):
    with RunStore.open(tmp_path / "run", SquareSpec()) as store:
        ctx = setup(SquareSpec())
        report = commit(store, InProcessExecutor(ctx).execute([], Worker(f"{ME}:setup", f"{ME}:work")))
    assert report.units == 0 and ctx["calls"] == []
