"""A writer killed with SIGKILL mid-write leaves a store that opens; rerunning completes exactly once.

Uses a real subprocess writing real batches into a real DuckDB file, killed at several moments.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from tamperbench.store import RunStore

N = 3000
WRITER = textwrap.dedent(
    f"""
    import sys
    from pydantic import BaseModel
    from tamperbench.store import Record, RunStore, trial_key

    class Spec(BaseModel):
        n: int = {N}

    class Trial(Record):
        i: int
        payload: list[float]

    store = RunStore.open(sys.argv[1], Spec())
    done = store.keys("trials")
    todo = [i for i in range({N}) if trial_key({{"i": i}}) not in done]
    print("start", len(todo), flush=True)
    for s in range(0, len(todo), 100):
        batch = [Trial(key=trial_key({{"i": i}}), i=i, payload=[float(i)] * 300) for i in todo[s:s + 100]]
        print("writing", s // 100, flush=True)
        store.write("trials", batch)
    store.close()
    print("done", flush=True)
    """
)


def run_writer(run_dir, kill_at_batch: int | None):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(run_dir)], stdout=subprocess.PIPE, text=True)
    if kill_at_batch is None:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
        return out
    assert proc.stdout.readline().startswith("start")
    while (line := proc.stdout.readline()) and line.strip() != f"writing {kill_at_batch}":
        pass
    assert line, f"the writer ended before batch {kill_at_batch} (exit {proc.wait()})"
    time.sleep(0.005)  # land inside the batch's transaction
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return None


def test_sigkill_mid_write_then_resume_has_every_key_once(tmp_path):
    from pydantic import BaseModel

    run = tmp_path / "run"
    counts = []
    for batch in (3, 5, 2):
        run_writer(run, batch)

        class Spec(BaseModel):
            n: int = N

        with RunStore.open(run, Spec()) as store:  # opens after the kill: WAL replayed, no corruption
            counts.append(store.count("trials"))
    assert counts == sorted(counts)
    assert counts[-1] < N, "the writer finished before any kill: raise N so the kill lands mid-run"
    out = run_writer(run, None)
    assert "done" in out
    with RunStore.open_existing(run, read_only=True) as store:
        total, distinct, lo, hi = store.con.execute(
            "SELECT count(*), count(DISTINCT i), min(i), max(i) FROM trials").fetchone()
    assert (total, distinct, lo, hi) == (N, N, 0, N - 1)
