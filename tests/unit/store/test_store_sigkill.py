"""A writer killed with SIGKILL mid-write leaves a store that opens; rerunning completes exactly once.

Uses a real subprocess writing real batches into a real DuckDB file. The writer's connection is
wrapped so that, at the chosen batch, it announces "in transaction" after the batch's INSERT ran
and then blocks before COMMIT: the kill lands inside the transaction by construction, not by a
sleep. After each kill the store must hold exactly the batches committed before it (whole batches
only: the batch in flight is rolled back, nothing of it is kept).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from tamperbench.store import RunStore

N = 1000  # 10 batches: a kill after 3 (fresh store), one after 5 more (resumed store), then the rest
BATCH = 100
WRITER = textwrap.dedent(
    f"""
    import sys, time
    from pydantic import BaseModel
    from tamperbench.store import Record, RunStore, trial_key

    class Spec(BaseModel):
        n: int = {N}

    class Trial(Record):
        i: int
        payload: list[float]

    class HangBeforeCommit:
        # the real connection; COMMIT of batch `hang_at` first says so, then waits for the kill
        def __init__(self, con, hang_at):
            self._con, self.hang_at, self.batch = con, hang_at, -1
        def execute(self, sql, *args):
            if sql.strip().upper().startswith("COMMIT") and self.batch == self.hang_at:
                print("in transaction", self.batch, flush=True)
                time.sleep(600)
            return self._con.execute(sql, *args)
        def __getattr__(self, name):
            return getattr(self._con, name)

    store = RunStore.open(sys.argv[1], Spec())
    store.con = hook = HangBeforeCommit(store.con, int(sys.argv[2]))
    done = store.keys("trials")
    todo = [i for i in range({N}) if trial_key({{"i": i}}) not in done]
    print("start", len(todo), flush=True)
    for s in range(0, len(todo), {BATCH}):
        batch = [Trial(key=trial_key({{"i": i}}), i=i, payload=[float(i)] * 20) for i in todo[s:s + {BATCH}]]
        hook.batch = s // {BATCH}
        store.write("trials", batch)
    store.close()
    print("done", flush=True)
    """
)


def run_writer(run_dir, kill_at_batch: int):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(run_dir), str(kill_at_batch)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("start")
    line = proc.stdout.readline()
    try:
        assert line.strip() == f"in transaction {kill_at_batch}", line
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def finish_in_process(run_dir, monkeypatch, capsys) -> str:
    """The same writer, unkilled, run to the end in this process (the kills above need a process of
    their own; the resume after them does not, and an interpreter start is ~0.5 s)."""
    monkeypatch.setattr(sys, "argv", ["writer", str(run_dir), "-1"])
    exec(compile(WRITER, "<writer>", "exec"), {"__name__": "sigkill_writer"})
    return capsys.readouterr().out


def test_sigkill_mid_write_then_resume_has_every_key_once(tmp_path, monkeypatch, capsys):
    from pydantic import BaseModel

    run = tmp_path / "run"
    counts = [0]
    for batch in (3, 5):
        run_writer(run, batch)

        class Spec(BaseModel):
            n: int = N

        with RunStore.open(run, Spec()) as store:  # opens after the kill: WAL replayed, no corruption
            counts.append(store.count("trials"))
            rows = store.con.execute("SELECT i FROM trials ORDER BY i").fetchall()
        # exactly the `batch` whole batches committed before the kill; none of the one in flight
        assert counts[-1] == counts[-2] + batch * BATCH, counts
        assert [i for (i,) in rows] == list(range(counts[-1]))  # whole, contiguous batches, no stray rows
    assert counts == [0, 300, 800]
    out = finish_in_process(run, monkeypatch, capsys)
    assert out.splitlines() == [f"start {N - 800}", "done"]  # resumed with only the 200 unwritten trials
    with RunStore.open_existing(run, read_only=True) as store:
        total, distinct, lo, hi = store.con.execute(
            "SELECT count(*), count(DISTINCT i), min(i), max(i) FROM trials").fetchone()
    assert (total, distinct, lo, hi) == (N, N, 0, N - 1)
