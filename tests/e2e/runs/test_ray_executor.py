"""The Ray executor on a real local Ray cluster with 2 CPU workers: a worker killed with SIGKILL in the
middle of a sweep has its units rescheduled; none lost, none duplicated (keys counted in the store).

The instance is started by ``RayExecutor`` itself without an address (the local path, in a helper
process begun at collection: tests/e2e/runs/conftest.py) and the test's executor joins it by
``--address``, as a cluster user would.

The worker is a small module written here (units sleep, then return a record with the worker's pid),
because the property under test is the executor's, not a suite's. Nothing is mocked: real Ray actors
in real processes, the real store and commit loop.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

from pydantic import BaseModel  # noqa: E402

from tamperbench.runs import Worker, WorkUnit, commit  # noqa: E402
from tamperbench.runs.ray_executor import RayExecutor  # noqa: E402
from tamperbench.store import RunStore  # noqa: E402

TOY = textwrap.dedent('''
    import os
    import time

    from tamperbench.runs.units import Finished
    from tamperbench.store import Record


    class ToyRow(Record):
        i: int
        pid: int


    def setup(config):
        return {"delay": config}


    def work(ctx, units, live):
        for u in units:
            time.sleep(ctx["delay"])
            yield [Finished(u.key, {"toy_rows": [ToyRow(key=u.key, i=u.payload, pid=os.getpid())]})]
''')


class _Spec(BaseModel):
    suite: str = "toy-ray"


@pytest.fixture
def toy_module(ray_head):
    """The worker module, written where the instance's workers import from (its PYTHONPATH)."""
    address, cpus, code_dir = ray_head
    (code_dir / "toy_ray_worker.py").write_text(TOY)
    sys.path.insert(0, str(code_dir))  # the driver unpickles ToyRow too
    yield address, cpus
    sys.path.remove(str(code_dir))
    sys.modules.pop("toy_ray_worker", None)
    if ray.is_initialized():
        ray.shutdown()


def test_killed_worker_units_are_rescheduled_none_lost_none_duplicated(toy_module, tmp_path):
    import toy_ray_worker

    address, cpus = toy_module
    assert cpus == 2  # the local start gave Ray workers x cpus_per_worker CPUs

    # 8 chunks of 2; the kill comes after 2 chunks, so at least 5 are left and the dead actor's next
    # (or current) chunk always fails over to the fresh actor. Short sleeps: Ray's start dominates.
    n = 16
    units = [WorkUnit(key=f"k{i:03d}", payload=i) for i in range(n)]
    ex = RayExecutor(address, workers=2, chunk=2)
    worker = Worker(setup="toy_ray_worker:setup", work="toy_ray_worker:work", config=0.05)
    yielded: list[str] = []
    killed: list[int] = []

    def batches():
        for batch in ex.execute(units, worker):
            yielded.extend(f.key for f in batch)
            if len(yielded) == 4 and not killed:  # mid-sweep: both actors are busy with later chunks
                pid = ex.actor_pids()[0]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            yield batch

    store = RunStore.open(tmp_path / "run", _Spec(), new=True)
    try:
        store.ensure_table("toy_rows", toy_ray_worker.ToyRow)
        report = commit(store, batches())
        rows = store.rows("toy_rows")
    finally:
        store.close()
    assert killed, "the test must kill a worker"
    assert sorted(yielded) == [u.key for u in units]  # every unit yielded exactly once
    assert report.units == n
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)) == n  # none lost, none duplicated in the store
    pids = {r["pid"] for r in rows}
    assert killed[0] not in pids or len(pids) >= 3  # a replacement actor did the rescheduled work
    assert len(pids) >= 3  # two original actors + at least one replacement


def test_the_run_driver_runs_a_toy_suite_on_ray_actors(ray_head, tmp_path):
    """A suite that declares only its parts (driver_toy_suite.py) runs on Ray through the run driver:
    its worker is rebuilt in the actors from import strings and the spec, and the driver alone commits.
    Rerun: nothing to do, nothing duplicated."""
    import shutil
    from pathlib import Path

    from tamperbench.runs.driver import run

    address, _, code_dir = ray_head
    shutil.copy(Path(__file__).with_name("driver_toy_suite.py"), code_dir / "driver_toy_suite.py")
    sys.path.insert(0, str(code_dir))
    try:
        sys.modules.pop("driver_toy_suite", None)
        from driver_toy_suite import SUITE, ToySpec

        spec = ToySpec(n=6, batch=1)
        result = run(SUITE, spec, tmp_path / "run", executor=RayExecutor(address, workers=2, chunk=2), progress=False)
        assert result.units == 6 and result.written["toy_rows"] == 6
        with RunStore.open_existing(tmp_path / "run", read_only=True) as store:
            rows = store.rows("toy_rows")
        assert sorted(r["square"] for r in rows) == [i * i for i in range(6)]
        assert os.getpid() not in {r["pid"] for r in rows}  # the work ran in the actors
        again = run(SUITE, spec, tmp_path / "run", executor=RayExecutor(address, workers=2), progress=False)
        assert again.units == 0 and again.done == 6
    finally:
        sys.path.remove(str(code_dir))
        sys.modules.pop("driver_toy_suite", None)
        if ray.is_initialized():
            ray.shutdown()
