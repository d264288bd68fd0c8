"""``tamperbench sweep``: one command runs a suite over several models, one resumable run per model.

The first sweep is a real CLI subprocess (the command's smoke test); the resume and the refusals run the
same entry point in-process (``tb_inprocess``, tests/conftest.py). The embedded model under two spellings
of its spec (the only model that ships here), a real store per run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tamperbench.store import RunStore

pytestmark = pytest.mark.model


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tamperbench.cli", *args], capture_output=True, text=True,
                          env=os.environ.copy(), timeout=900)


def test_sweep_runs_the_matrix_and_resumes(tmp_path, tb_inprocess):
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"suite": "quote", "models": ["embedded", "smollm2-135m-instruct"],
                                 "spec": {"arms": ["plain"], "item_ids": ["S01"], "max_new_tokens": 8}}))
    r = cli("sweep", str(sweep), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    for name in ("embedded", "smollm2-135m-instruct"):
        with RunStore.open_existing(tmp_path / "out" / name, read_only=True) as store:
            rows = store.rows("quote_trials")
        assert len(rows) == 1 and rows[0]["model"] == name and rows[0]["item_id"] == "S01"
    again = tb_inprocess("sweep", str(sweep), "--out", str(tmp_path / "out"))
    assert again.returncode == 0, again.stderr
    with RunStore.open_existing(tmp_path / "out" / "embedded", read_only=True) as store:
        assert store.count("quote_trials") == 1  # resumed: nothing duplicated


@pytest.mark.parametrize("body, field", [
    ({"suite": "quote", "models": []}, "models"),
    ({"suite": "nope", "models": ["embedded"]}, "suite"),
    ({"suite": "quote", "models": ["embedded"], "spec": {"model": "x"}}, "spec.model"),
    ({"suite": "quote", "models": ["embedded"], "spec": {"max_new_tokens": 0}}, "spec.max_new_tokens"),
    ({"suite": "quote", "models": ["a/b", "a_b"]}, "models"),
])
def test_bad_sweep_files_are_one_line(tmp_path, tb_inprocess, body, field):
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps(body))
    r = tb_inprocess("sweep", str(sweep), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and f"field '{field}" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
