"""OWMI through the run driver with no special case: a tiny OWMI spec file through ``tamperbench run``
(``--dry-run``, the run, resume with nothing to do) and through ``tamperbench sweep``, as the toy suite
(test_driver_toy_suite.py) gets them, from its registered ``SuiteDef`` alone.

Real CLI entry point in-process (``tb_inprocess``, tests/conftest.py), the embedded model, real stores.
"""

from __future__ import annotations

import json
import re

import pytest

from tamperbench.store import RunStore

pytestmark = pytest.mark.model

TINY = {  # one cell, one item, one seed, one track: the smallest run that still calibrates (random_matched)
    "objects": [{"kind": "resid_post", "layer": 12}], "operators": [{"name": "add", "dose": 64.0}],
    "items_per_benchmark": 1, "seeds": [0], "probes": ["detection"], "tracks": ["A"], "scopes": ["active"],
    "conditions": ["intervention", "sham", "random_matched"], "calibration_steps": 1, "task_max_new_tokens": 2,
    "probe_max_new_tokens": 2, "observer_classifier": False}


def _rows(run) -> tuple[list[dict], list[dict]]:
    with RunStore.open_existing(run, read_only=True) as store:
        return store.rows("owmi_runs"), store.rows("owmi_calibration")


def test_owmi_spec_file_runs_dry_runs_and_resumes_through_tamperbench_run(tmp_path, embedded_backend, tb_inprocess):
    from tamperbench.owmi.run.runner import SUITE
    from tamperbench.runs.driver import definition
    from tamperbench.suites import get_suite

    assert definition(get_suite("owmi")) is SUITE  # the registry's definition: run_registered drives it
    spec = tmp_path / "owmi.json"
    spec.write_text(json.dumps({"suite": "owmi", "models": ["embedded"], **TINY}))
    run = tmp_path / "run"
    dry = tb_inprocess("run", str(spec), "--out", str(run), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "3 records in the spec, 0 already stored, 3 to run" in dry.stdout and "dry run: nothing was decoded or stored" in dry.stdout, dry.stdout
    assert not run.exists()
    ran = tb_inprocess("run", str(spec), "--out", str(run))
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"owmi embedded .*1/1 .*tok", ran.stderr), ran.stderr  # the driver's bar: one (item, seed) unit
    rows, cal = _rows(run)
    assert sorted(r["condition"] for r in rows) == ["intervention", "random_matched", "sham"]
    assert len(cal) == 1 and all(r["provenance_id"] for r in rows)
    again = tb_inprocess("run", str(spec), "--out", str(run))
    assert again.returncode == 0 and "nothing to do: all 1 unit of this spec are stored" in again.stderr, again.stderr
    assert len(_rows(run)[0]) == 3


def test_owmi_sweep_goes_through_the_driver(tmp_path, embedded_backend, tb_inprocess):
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"suite": "owmi", "models": ["embedded"], "spec": TINY}))
    r = tb_inprocess("sweep", str(sweep), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    rows, cal = _rows(tmp_path / "out" / "embedded")
    assert len(rows) == 3 and {r["model"] for r in rows} == {"embedded"} and len(cal) == 1
    with open(tmp_path / "out" / "embedded" / "spec.json") as f:
        assert json.load(f)["models"] == ["embedded"]  # the sweep's model, held as the spec's models
