"""A run resumed with its model read from another folder (another ``$TAMPERBENCH_HOME``, a moved
cache) resumes under the stored provenance id instead of redoing every stored unit under a new one.

Found on the Sleight of Word paper run: a resume with another home changed the model's
``resolved_path``, hence the provenance id and every trial key, and 1,111 stored trials were decoded a
second time. The toy suite's backend carries a real :class:`ModelProvenance` here (no model is loaded:
the driver only reads the record)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.models.provenance import ModelProvenance
from tamperbench.runs.driver import run
from tamperbench.store import RunStore

SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def _backend(toy, where: str, sha256: str = SHA):
    backend = toy.ToyBackend("toy-a")
    backend.provenance = ModelProvenance(source="embedded", kind="embedded", resolved_path=where, sha256=sha256,
                                         tamperbench_version="0", python_version="3.11.0")
    return backend


def _stored(out: Path) -> tuple[list[str], list[str]]:
    with RunStore.open_existing(out, read_only=True) as store:
        rows = store.rows("toy_rows")
        ids = [i for (i,) in store.con.execute("SELECT id FROM provenance").fetchall()]
    return sorted(r["provenance_id"] for r in rows), ids


def test_a_moved_model_folder_resumes_under_the_stored_id(tmp_path, toy):
    out = tmp_path / "run"
    first = _backend(toy, "/home-a/models/x")
    run(toy.SUITE, toy.ToySpec(n=6), out, backend=first, progress=False)
    with RunStore.open_existing(out) as store:  # as if the run had been stopped after 4 units
        store.con.execute("DELETE FROM toy_rows WHERE i >= 4")
    # the same run, resumed with the weights read from elsewhere
    moved = _backend(toy, "/home-b/models/x")
    buf = io.StringIO()
    result = run(toy.SUITE, toy.ToySpec(n=6), out, backend=moved, console=Console(file=buf, width=300), progress=False)
    row_ids, prov_ids = _stored(out)
    assert prov_ids == [first.provenance.id]  # no second provenance
    assert row_ids == [first.provenance.id] * 6  # 4 kept, 2 new: nothing redone
    assert result.done == 4 and result.units == 2
    assert moved.provenance.id == first.provenance.id  # the worker keyed the new units as stored
    assert "resuming under " + first.provenance.id in buf.getvalue()


def test_other_weights_or_a_remote_model_are_never_merged(tmp_path, toy):
    out = tmp_path / "run"
    run(toy.SUITE, toy.ToySpec(n=2), out, backend=_backend(toy, "/a"), progress=False)
    run(toy.SUITE, toy.ToySpec(n=2), out, backend=_backend(toy, "/b", sha256="c" * 64), progress=False)
    # an unverified hash (a remote model): its address is its identity
    run(toy.SUITE, toy.ToySpec(n=2), out, backend=_backend(toy, "http://b", sha256="unverified-remote"),
        progress=False)
    run(toy.SUITE, toy.ToySpec(n=2), out, backend=_backend(toy, "http://c", sha256="unverified-remote"),
        progress=False)
    row_ids, prov_ids = _stored(out)
    assert len(prov_ids) == 4 and len(row_ids) == 8


def test_remote_workers_refuse_a_moved_folder_in_one_line(tmp_path, toy):
    out = tmp_path / "run"
    run(toy.SUITE, toy.ToySpec(n=2), out, backend=_backend(toy, "/home-a/x"), progress=False)

    class Remote:  # an executor that is not in-process: the driver must not reach it
        def execute(self, units, worker):
            raise AssertionError("ran")

    with pytest.raises(UserError, match="TAMPERBENCH_HOME"):
        run(dataclasses.replace(toy.SUITE), toy.ToySpec(n=2), out, backend=_backend(toy, "/home-b/x"),
            executor=Remote(), progress=False)
    assert _stored(out)[0] == sorted([_backend(toy, "/home-a/x").provenance.id] * 2)
