"""``tamperbench owmi run --config`` then ``tamperbench export``: complete pairs for intervention,
sham, random and observer, on the embedded model (a one-item config; the quick preset itself takes
minutes and runs in ``make demo``). The first run is a real CLI process (the command's smoke test); the
export and the resumed run call the same entry point in-process (``tb_inprocess``, tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
pytestmark = pytest.mark.model


def _cli(*args):
    env = {**os.environ, "COLUMNS": "220"}  # rich wraps narrow tables; keep condition names whole
    return subprocess.run([sys.executable, "-m", "tamperbench.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env=env)


def test_run_then_export_shows_complete_pairs(tmp_path, embedded_backend, tb_inprocess):
    def _in(*args):
        return tb_inprocess(*args, cwd=REPO, env={"COLUMNS": "220"})

    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({
        "objects": [{"kind": "resid_post", "layer": 12}], "operators": [{"name": "add", "dose": 64.0}],
        "items_per_benchmark": 1, "probes": ["detection"], "tracks": ["A"], "calibration_steps": 2,
        "task_max_new_tokens": 4, "probe_max_new_tokens": 8, "observer_classifier": False}))
    run = tmp_path / "run"
    p = _cli("owmi", "run", "--config", str(cfg), "--out", str(run))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "random_matched" in p.stdout and "impact matching" in p.stdout
    out = tmp_path / "x.jsonl"
    p = _in("export", str(run), "--format", "jsonl", "--out", str(out), "--table", "owmi_runs")
    assert p.returncode == 0, p.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    pairs: dict[str, set] = {}
    for r in rows:
        pairs.setdefault(r["pair_id"], set()).add(r["condition"])
    assert len(pairs) == 2  # active and lifted scope
    assert all(v == {"intervention", "sham", "random_unit", "random_matched", "observer"} for v in pairs.values())
    p = _in("owmi", "run", "--config", str(cfg), "--out", str(run))
    assert p.returncode == 0 and "0 records written" in p.stderr and "1 of 1 units already stored" in p.stderr
