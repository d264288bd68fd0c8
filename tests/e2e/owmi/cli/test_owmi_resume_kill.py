"""A real ``tamperbench owmi run`` killed with SIGKILL mid-run resumes with every key exactly once.

The run is a one-item config (a scaled residual stream, so no concept direction to build; Track A
and the delayed Track B, detection, both scopes, intervention, sham and the tier-1 observer):
1 item x 2 tracks x 1 probe x 2 scopes x 3 conditions = 12 records, written in 4 groups (each
track's batched rows of intervention and sham; the observer on each track). The test polls
the store while the run writes it -- a copy of ``records.duckdb`` and its WAL, opened with the WAL
replayed, which is what DuckDB would recover after a crash at that instant -- and kills the
process as soon as the first records are committed, i.e. in the middle of the only unit (before
this change a unit's records were written together at its end, so the kill lost them all). After
the kill the stored records must still hold what the poll saw; the resumed run must finish the
rest, leave every key exactly once and not touch the survivors.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tamperbench.store import RunStore

REPO = Path(__file__).resolve().parents[4]
pytestmark = pytest.mark.model
TOTAL = 12  # 1 item x 2 tracks x 1 probe x 2 scopes x (intervention, sham, observer tier 1)
COLS = "key, condition, track, hook_scope, response, prompt_text, created_at, js_mean"


def _snapshot(run: Path, tmp: Path) -> list[tuple] | None:
    """The records a crash right now would leave: copy the database and its WAL, open the copy."""
    snap = tmp / "snap"
    shutil.rmtree(snap, ignore_errors=True)
    snap.mkdir()
    try:
        for name in ("records.duckdb", "records.duckdb.wal"):
            if (run / name).exists():
                shutil.copy(run / name, snap / name)
        con = duckdb.connect(str(snap / "records.duckdb"))
    except (OSError, duckdb.Error):  # caught mid-checkpoint or before the file exists: poll again
        return None
    try:
        if not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'owmi_runs'").fetchone()[0]:
            return []
        return con.execute(f"SELECT {COLS} FROM owmi_runs ORDER BY key").fetchall()
    except duckdb.Error:
        return None
    finally:
        con.close()


def _stamp(run: Path) -> list | None:
    try:
        return [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(run.glob("records.duckdb*"))]
    except OSError:  # the WAL vanished between glob and stat (a checkpoint): look again
        return None


def _stored(run: Path) -> list[tuple]:
    with RunStore.open_existing(run, read_only=True) as store:
        return store.con.execute(f"SELECT {COLS} FROM owmi_runs ORDER BY key").fetchall()


def test_sigkill_mid_unit_then_resume_keeps_finished_records(tmp_path, embedded_backend):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({
        "objects": [{"kind": "resid_post", "layer": 12}], "operators": [{"name": "scale", "dose": 0.5}],
        "items_per_benchmark": 1, "probes": ["detection"], "tracks": ["A", "B_delayed"],
        "conditions": ["intervention", "sham", "observer"], "observer_classifier": False,
        "task_max_new_tokens": 4, "probe_max_new_tokens": 4}))
    run = tmp_path / "run"
    args = [sys.executable, "-m", "tamperbench.cli", "owmi", "run", "--config", str(cfg), "--out", str(run)]
    with open(tmp_path / "err1", "w") as err:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)
        seen: list[tuple] = []
        deadline, last = time.monotonic() + 600, None
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                stamp = _stamp(run)
                if stamp != last:  # open a copy only when the store changed (keeps the poll cheap)
                    last = stamp
                    got = _snapshot(run, tmp_path)
                    if got:
                        seen = got
                        break
                time.sleep(0.1)  # poll interval, not a guess at when to kill
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "err1").read_text()[-2000:]
    assert 0 < len(seen) < TOTAL, len(seen)

    killed = _stored(run)
    assert set(seen) <= set(killed)  # every record committed before the kill survived, unchanged
    assert len(killed) < TOTAL  # the kill landed mid-run (not after the last group)
    assert len({r[0] for r in killed}) == len(killed)

    p = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"{TOTAL - len(killed)} records written" in p.stderr
    final = _stored(run)
    keys = [r[0] for r in final]
    assert len(final) == TOTAL and len(set(keys)) == TOTAL  # every key exactly once
    assert set(killed) <= set(final)  # survivors untouched by the resume (same created_at, same text)
    groups = {(r[1], r[2], r[3]) for r in final}
    assert groups == {(c, t, s) for c in ("intervention", "sham", "observer") for t in ("A", "B_delayed")
                      for s in ("active", "lifted")}
    assert all(r[4] is not None for r in final)
    assert all(r[7] is not None for r in final if r[1] != "observer")  # JS recorded on resumed model runs too
