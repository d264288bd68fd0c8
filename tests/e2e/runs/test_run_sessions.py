"""Every process that writes to a run records what it computed with (``runs.session``): torch's thread
count, the environment that steers the kernels, the command and the commit. WHY: under another thread
count a CPU computes other bits (29 of 222 sampled Exact Words answers differed between one and two
threads, docs/reproducing.md), yet the count must stay out of the provenance id, which keys every trial.

The toy suite's backend carries a real :class:`ModelProvenance` (no model loaded); the last test runs the
real embedded model through ``tamperbench sleight run``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tamperbench.models.provenance import ModelProvenance
from tamperbench.runs.driver import run
from tamperbench.store import RunStore
from tamperbench.store.sessions import read_sessions

SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _backend(toy):
    backend = toy.ToyBackend("toy-a")
    backend.provenance = ModelProvenance(source="embedded", kind="embedded", resolved_path="/m", sha256=SHA,
                                         tamperbench_version="0", python_version="3.11.0")
    return backend


def _read(out: Path) -> tuple[list[dict], list[str], list[str]]:
    with RunStore.open_existing(out, read_only=True) as store:
        keys = sorted(r["key"] for r in store.rows("toy_rows"))
        return read_sessions(store), keys, store.tables()


def test_a_resume_under_another_thread_count_keeps_its_trials_and_records_both(tmp_path, toy, threads, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    run(toy.SUITE, toy.ToySpec(n=6), out, backend=_backend(toy), progress=False)
    with RunStore.open_existing(out) as store:  # as if stopped after 4 units
        store.con.execute("DELETE FROM toy_rows WHERE i >= 4")
    _, kept, _ = _read(out)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    torch.set_num_threads(2)
    result = run(toy.SUITE, toy.ToySpec(n=6), out, backend=_backend(toy), progress=False)
    sessions, keys, tables = _read(out)
    assert result.done == 4 and result.units == 2  # the thread count is not in any key: nothing redone
    assert set(kept) <= set(keys) and len(keys) == 6
    assert [s["torch_threads"] for s in sessions] == [1, 2]
    assert [s["env"]["OMP_NUM_THREADS"] for s in sessions] == ["1", "2"]
    assert {s["provenance_id"] for s in sessions} == {_backend(toy).provenance.id}
    assert all(s["pid"] > 0 and s["cpu_count"] and s["recorded_at"] >= s["started_at"] for s in sessions)
    assert "sessions" in tables


def test_the_same_settings_recorded_again_are_one_row(tmp_path, toy, threads):
    out = tmp_path / "run"
    torch.set_num_threads(1)
    for _ in range(3):  # a resume that finds nothing to do records nothing new either
        run(toy.SUITE, toy.ToySpec(n=3), out, backend=_backend(toy), progress=False)
    sessions, keys, _ = _read(out)
    assert len(keys) == 3 and len(sessions) == 1


def test_sessions_are_neither_records_nor_copies(tmp_path, toy, threads):
    """The table is internal: an export leaves it out (and does not refuse the run for it), and two
    independent runs of one spec are not taken for copies because each has sessions of its own, nor is
    a real copy kept because its session rows differ."""
    from tamperbench.export.tables import export_run
    from tamperbench.store.distinct import distinct_records

    a, b = tmp_path / "a", tmp_path / "b"
    torch.set_num_threads(1)
    run(toy.SUITE, toy.ToySpec(n=3), a, backend=_backend(toy), progress=False)
    torch.set_num_threads(2)
    run(toy.SUITE, toy.ToySpec(n=3), b, backend=_backend(toy), progress=False)  # the same trials: a copy
    written = export_run(a, "jsonl", tmp_path / "x.jsonl")
    assert [name for name, _, _ in written] == ["toy_rows"]
    kept, notes = distinct_records([a, b])
    assert kept == [a] and "copy" in notes[0]


def test_a_real_run_records_the_processes_threads_and_command(tmp_path, tb_inprocess, threads):
    """``tamperbench sleight run`` on the embedded model through the console entry point, on one thread."""
    out = tmp_path / "run"
    torch.set_num_threads(1)
    proc = tb_inprocess("sleight", "run", "--preset", "demo", "--questions", "1", "--words", "1",
                        "--max-new-tokens", "16", "--device", "cpu", "--out", out, env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    with RunStore.open_existing(out, read_only=True) as store:
        sessions = read_sessions(store)
        pids = {r["provenance_id"] for r in store.rows("sleight_trials")}
    assert len(sessions) == 1
    s = sessions[0]
    assert s["torch_threads"] == 1 and s["env"]["OMP_NUM_THREADS"] == "1"
    assert s["argv"][:3] == ["tamperbench", "sleight", "run"] and str(out) in s["argv"]
    assert {s["provenance_id"]} == pids
    assert s["tamperbench_commit"] is None or len(s["tamperbench_commit"]) == 40
