"""A suite that declares only its parts (driver_toy_suite.py: spec, table, plan, worker, loader, estimate)
gets ``tamperbench run``, ``--dry-run``, a sweep, resume after a SIGKILL and provenance from the run driver
alone (tamperbench/runs/driver.py). The Ray executor on the same toy is in test_ray_executor.py (it shares
that module's local Ray instance).

Real CLI entry point (in-process, ``tb_inprocess``; the killed run is a real subprocess), real DuckDB
stores, registered only through ``TAMPERBENCH_SUITES``. No model: a unit squares its number.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tamperbench.store import RunStore

HERE = Path(__file__).resolve().parent
REGISTER = {"TAMPERBENCH_SUITES": "driver_toy_suite:REGISTERED"}


@pytest.fixture
def toy(tb_inprocess, monkeypatch):
    """``tamperbench ARGS`` in-process with the driver toy registered (its module is beside this file)."""
    monkeypatch.syspath_prepend(str(HERE))
    return lambda *args, env=None: tb_inprocess(*args, env={**REGISTER, **(env or {})})


def _spec(tmp_path: Path, **fields) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"suite": "toy-driver", **fields}))
    return path


def _rows(run: Path) -> list[dict]:
    with RunStore.open_existing(run, read_only=True) as store:
        return store.rows("toy_rows")


def _provenance(run: Path) -> list[tuple]:
    with RunStore.open_existing(run, read_only=True) as store:
        return store.con.execute("SELECT * FROM provenance").fetchall()


def test_run_stores_rows_and_provenance_and_resumes_with_nothing_to_do(tmp_path, toy):
    from driver_toy_suite import ToyBackend

    spec = _spec(tmp_path, n=5)
    ran = toy("run", str(spec), "--out", str(tmp_path / "run"))
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"toy-driver .*5/5 5/5 tok", ran.stderr), ran.stderr  # the bar: 5 units, 1 token each
    rows = _rows(tmp_path / "run")
    assert sorted((r["i"], r["square"]) for r in rows) == [(i, i * i) for i in range(5)]
    prov = ToyBackend("toy-a").provenance
    assert {r["provenance_id"] for r in rows} == {prov.id}
    assert [(pid, json.loads(body)) for pid, body in _provenance(tmp_path / "run")] == [(prov.id, prov.model_dump())]
    assert json.loads((tmp_path / "run" / "spec.json").read_text()) == {
        "suite": "toy-driver", "model": "toy-a", "n": 5, "batch": 2, "delay": 0.0}

    again = toy("run", str(spec), "--out", str(tmp_path / "run"))
    assert again.returncode == 0, again.stderr
    assert "nothing to do: all 5 squares of this spec are stored" in again.stderr
    assert len(_rows(tmp_path / "run")) == 5


def test_dry_run_plans_without_creating_anything_then_counts_what_is_stored(tmp_path, toy):
    spec = _spec(tmp_path, n=4)
    dry = toy("run", str(spec), "--out", str(tmp_path / "run"), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "plan: toy-driver: 4 squares in the spec, 0 already stored, 4 to run" in dry.stdout, dry.stdout
    assert "note: the driver toy's plan" in dry.stdout and "dry run: nothing was decoded or stored" in dry.stdout
    assert not (tmp_path / "run").exists()
    assert toy("run", str(spec), "--out", str(tmp_path / "run")).returncode == 0
    again = toy("run", str(spec), "--out", str(tmp_path / "run"), "--dry-run")
    assert "plan: toy-driver: 4 squares in the spec, 4 already stored, 0 to run" in again.stdout, again.stdout


def test_sweep_runs_each_model_into_its_own_resumable_run(tmp_path, toy):
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"suite": "toy-driver", "models": ["toy-a", "toy-b"], "spec": {"n": 3}}))
    for _ in range(2):  # the second sweep resumes: nothing to do, nothing duplicated
        r = toy("sweep", str(sweep), "--out", str(tmp_path / "out"))
        assert r.returncode == 0, r.stderr
        for model in ("toy-a", "toy-b"):
            rows = _rows(tmp_path / "out" / model)
            assert sorted(r["i"] for r in rows) == [0, 1, 2] and {r["model"] for r in rows} == {model}
            assert [json.loads(body)["source"] for _, body in _provenance(tmp_path / "out" / model)] == [model]
    assert r.stderr.count("nothing to do") == 2


def test_a_run_killed_mid_way_resumes_losing_and_repeating_nothing(tmp_path, toy):
    n = 12
    spec = _spec(tmp_path, n=n, batch=1, delay=0.3)
    first, second = tmp_path / "trace-1", tmp_path / "trace-2"
    env = {**os.environ, **REGISTER, "TOY_TRACE": str(first),
           "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "tamperbench.cli", "run", str(spec), "--out", str(tmp_path / "run")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (first.exists() and len(first.read_text().splitlines()) >= 4):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the run never got going"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
        if proc.stderr:
            proc.stderr.close()
    stored = {r["i"] for r in _rows(tmp_path / "run")}
    assert 3 <= len(stored) < n  # the killed run committed what finished before the kill, and no more than it ran

    again = toy("run", str(spec), "--out", str(tmp_path / "run"), env={"TOY_TRACE": str(second)})
    assert again.returncode == 0, again.stderr
    rerun = [int(line.split()[0]) for line in second.read_text().splitlines()]
    assert sorted(rerun) == sorted(set(range(n)) - stored)  # only the missing units ran again, once each
    rows = _rows(tmp_path / "run")
    assert sorted(r["i"] for r in rows) == list(range(n))  # none lost, none duplicated


def test_the_hooks_a_multi_model_suite_needs(tmp_path, monkeypatch):
    """What OWMI's port relies on: several models one after another into one store (one provenance row
    each), a check on each loaded backend before any compute, and a ``finish`` step that writes derived
    rows from the driver process once every model is done; a resume runs nothing and finishes again."""
    import dataclasses
    import io

    from rich.console import Console

    monkeypatch.syspath_prepend(str(HERE))
    from driver_toy_suite import SUITE, TABLE, ToyRow, ToySpec

    from tamperbench.errors import UserError
    from tamperbench.runs.driver import run

    checked, finished = [], []

    def finish(spec, store, result):
        finished.append(dict(result.written))
        total = sum(r["square"] for r in store.rows(TABLE) if r["i"] >= 0)
        store.write(TABLE, [ToyRow(key="sum", provenance_id="", model="all", i=-1, square=total, pid=0)])

    multi = dataclasses.replace(SUITE, models=lambda spec: ["toy-a", "toy-b"], finish=finish,
                                check=lambda spec, backend, model: checked.append(model))
    result = run(multi, ToySpec(n=3), tmp_path / "run", progress=False)
    assert checked == ["toy-a", "toy-b"] and finished == [{TABLE: 6}]
    assert (result.units, result.total, result.done) == (6, 6, 0)
    rows = _rows(tmp_path / "run")
    assert sorted((r["model"], r["i"]) for r in rows if r["i"] >= 0) == [(m, i) for m in ("toy-a", "toy-b") for i in range(3)]
    assert [r["square"] for r in rows if r["key"] == "sum"] == [2 * (0 + 1 + 4)]
    assert sorted(json.loads(body)["source"] for _, body in _provenance(tmp_path / "run")) == ["toy-a", "toy-b"]

    buf = io.StringIO()
    again = run(multi, ToySpec(n=3), tmp_path / "run", console=Console(file=buf, width=200))
    assert again.units == 0 and again.done == 6 and len(finished) == 2
    assert "nothing to do: all 3 squares of this spec are stored" in buf.getvalue() and "(toy-b)" in buf.getvalue()

    def refuse(spec, backend, model):
        raise UserError(f"models ({model}): refused before any compute")

    with pytest.raises(UserError, match="refused before any compute"):
        run(dataclasses.replace(multi, check=refuse), ToySpec(n=3), tmp_path / "other", progress=False)
    assert not (tmp_path / "other").exists()  # the check runs before the store is created
