"""RunStore details a mutant could change without the other store tests noticing: canonical JSON
of non-ASCII text and non-JSON values, the record defaults, the exact refusal lines (unreadable
spec, foreign database, another spec), the lock given back when an open fails, readers that take
no lock, the temporary Arrow view dropped after a failed write, and provenance stored once.
Real DuckDB files under tmp_path; expected values written out by hand."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import duckdb
import pytest
from pydantic import BaseModel

from tamperbench.errors import UserError
from tamperbench.store import Record, RunStore, lock, trial_key
from tamperbench.store.run_store import SCHEMA_VERSION, canonical_json, read_spec


class Spec(BaseModel):
    suite: str = "bite"
    n: int = 1
    extra: str = "x"


class Row(Record):
    kind: str
    tags: list[str] = []
    info: dict = {}


class Prov(BaseModel):
    id: str
    note: str


def test_canonical_json_keeps_text_and_stringifies_the_rest():
    assert canonical_json({"b": "é", "a": Path("/x")}) == '{"a":"/x","b":"é"}'
    assert canonical_json(Spec()) == '{"extra":"x","n":1,"suite":"bite"}'
    assert trial_key({"b": "é"}) == hashlib.sha256('{"b":"é"}'.encode("utf-8")).hexdigest()


def test_record_defaults():
    r = Row(key="k", kind="a")
    assert r.schema_version == SCHEMA_VERSION == 1 and r.provenance_id == ""
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", r.created_at)


def test_read_spec_exact_lines(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(UserError) as err:
        read_spec(tmp_path / "dir.json")
    assert str(err.value) == f"{tmp_path / 'dir.json'}: cannot read (Is a directory)"
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(UserError) as err:
        read_spec(bad, hint="; HINT")
    assert str(err.value) == f"{bad}: not valid JSON (Expecting property name enclosed in double quotes); HINT"
    bad.write_bytes(b"\xff{}")
    with pytest.raises(UserError) as err:
        read_spec(bad)
    assert str(err.value) == f"{bad}: not valid JSON ('utf-8' codec can't decode byte 0xff in position 0)"
    bad.write_text('{"a" 1}')  # the decoder's own message has a colon in it: kept whole
    with pytest.raises(UserError) as err:
        read_spec(bad)
    assert str(err.value) == f"{bad}: not valid JSON (Expecting ':' delimiter)"
    bad.write_text('"text"')
    with pytest.raises(UserError) as err:
        read_spec(bad, hint="; H")
    assert str(err.value) == f"{bad}: not a JSON object; H"
    bad.write_text('{"a": 1}')
    assert read_spec(bad) == {"a": 1}


def test_other_spec_is_refused_naming_every_differing_field_and_releases_the_lock(tmp_path):
    run = tmp_path / "run"
    RunStore.open(run, Spec()).close()
    with pytest.raises(UserError) as err:
        RunStore.open(run, Spec(n=2, extra="y"))
    assert str(err.value) == (f"{run}: holds a run with a different spec (differs in: extra, n); "
                              "use another --out or pass --new to replace it")
    assert str(run.resolve()) not in lock._held  # the failed open gave its lock back
    spec = json.loads((run / "spec.json").read_text())
    spec["only_stored"] = 1
    (run / "spec.json").write_text(json.dumps(spec))
    with pytest.raises(UserError) as err:
        RunStore.preflight(run, Spec())
    assert str(err.value) == (f"{run}: holds a run with a different spec (differs in: only_stored); "
                              "use another --out or pass --new to replace it")
    (run / "spec.json").write_text("garbage")
    with pytest.raises(UserError) as err:
        RunStore.preflight(run, Spec())
    assert str(err.value) == f"{run / 'spec.json'}: not valid JSON (Expecting value); pass --new to start this run afresh"
    RunStore.preflight(run, Spec(), new=True)  # --new never reads the old spec
    with pytest.raises(UserError, match="; pass --new to start this run afresh$"):
        RunStore.open(run, Spec())
    with RunStore.open(run, Spec(n=3), new=True) as store:  # --new replaces even a garbage spec
        assert store.spec_dict == {"extra": "x", "n": 3, "suite": "bite"}
    assert json.loads((run / "spec.json").read_text()) == {"extra": "x", "n": 3, "suite": "bite"}
    assert (run / "spec.json").read_text() == json.dumps({"extra": "x", "n": 3, "suite": "bite"}, indent=2,
                                                          sort_keys=True)
    assert not (run / "spec.json.tmp").exists()


def test_database_without_schema_version_is_refused_by_a_reader(tmp_path):
    run = tmp_path / "run"
    RunStore.open(run, Spec()).close()
    con = duckdb.connect(str(run / "records.duckdb"))
    con.execute("DELETE FROM meta")
    con.close()
    with pytest.raises(UserError) as err:
        RunStore.open_existing(run, read_only=True)
    assert str(err.value) == (f"{run / 'records.duckdb'}: written with store no schema version; this tamperbench "
                              "reads schema version 1 (use the tamperbench version that wrote it, or export from it)")


def test_foreign_duckdb_file_without_meta_table(tmp_path):
    run = tmp_path / "run"
    RunStore.open(run, Spec()).close()
    (run / "records.duckdb").unlink()
    con = duckdb.connect(str(run / "records.duckdb"))
    con.execute("CREATE TABLE other (x INT)")
    con.close()
    with pytest.raises(UserError, match="written with store no schema version"):
        RunStore.open_existing(run, read_only=True)


def test_open_existing_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "spec.json").write_text("{}")
    with pytest.raises(UserError) as err:
        RunStore.open_existing(tmp_path / "run")
    assert str(err.value) == f"{tmp_path / 'run'}: not a tamperbench run directory (no spec.json / records.duckdb)"


def test_readers_take_no_lock_writers_do_and_close_gives_it_back(tmp_path):
    run = tmp_path / "run"
    RunStore.open(run, Spec()).close()
    key = str(run.resolve())
    with RunStore.open_existing(run, read_only=True) as reader:
        assert key not in lock._held and reader.tables() == ["meta", "provenance"]
        assert reader.run_dir == run and reader.spec_dict == {"extra": "x", "n": 1, "suite": "bite"}
    writer = RunStore.open_existing(run)
    assert lock._held[key][1] == 1
    writer.close()
    assert key not in lock._held
    writer.close()  # a second close is harmless and releases nothing twice
    assert key not in lock._held


def test_write_records_json_columns_and_creates_the_table(tmp_path):
    with RunStore.open(tmp_path / "run", Spec()) as store:
        assert not store.has_table("t") and store.rows("t") == [] and store.column_types("t") == {}
        assert store.write("t", [Row(key="k1", kind="a", tags=["x", "y"], info={"deep": [1, {"z": None}]})]) == 1
        [r] = store.rows("t")
        assert r["tags"] == ["x", "y"] and r["info"] == {"deep": [1, {"z": None}]}
        assert store.column_types("t")["info"] == "JSON" and store.column_types("t")["tags"] == "VARCHAR[]"
        assert store.tables() == ["meta", "provenance", "t"]
        raw = store.con.execute('SELECT info FROM "t"').fetchone()[0]
        assert json.loads(raw) == {"deep": [1, {"z": None}]}


class PathRow(Record):
    where: Path


def test_json_columns_hold_the_json_form_of_each_value(tmp_path):
    with RunStore.open(tmp_path / "run", Spec()) as store:
        assert store.write("p", [PathRow(key="k", where=Path("/a/b"))]) == 1
        assert store.column_types("p")["where"] == "JSON" and store.rows("p")[0]["where"] == "/a/b"


def test_a_failed_write_drops_the_arrow_view(tmp_path):
    with RunStore.open(tmp_path / "run", Spec()) as store:
        store.write("t", [Row(key="k1", kind="a")])
        store.con.execute('ALTER TABLE "t" ADD COLUMN must INTEGER NOT NULL DEFAULT 0')
        store.con.execute('ALTER TABLE "t" ALTER COLUMN must DROP DEFAULT')
        with pytest.raises(duckdb.Error):
            store.write("t", [Row(key="k2", kind="b")])  # NOT NULL column left empty: the insert fails
        with pytest.raises(duckdb.Error):
            store.con.execute("SELECT * FROM batch")
        assert store.count("t") == 1


def test_table_without_key_is_refused():
    class NoKey(BaseModel):
        x: int

    store = RunStore.__new__(RunStore)
    with pytest.raises(TypeError, match="^NoKey must have a 'key' field \\(subclass Record\\)$"):
        store.ensure_table("t", NoKey)


def test_key_is_the_primary_key_and_provenance_is_stored_once(tmp_path):
    with RunStore.open(tmp_path / "run", Spec()) as store:
        store.ensure_table("t", Row)
        store.con.execute('INSERT INTO "t" (key, kind) VALUES (\'k\', \'a\')')
        with pytest.raises(duckdb.Error):
            store.con.execute('INSERT INTO "t" (key, kind) VALUES (\'k\', \'b\')')
        assert store.put_provenance(Prov(id="p1", note="first")) == "p1"
        assert store.put_provenance(Prov(id="p1", note="second")) == "p1"  # ignored, not replaced
        rows = store.con.execute("SELECT id, record FROM provenance").fetchall()
        assert [(i, json.loads(r)) for i, r in rows] == [("p1", {"id": "p1", "note": "first"})]
        assert store.keys("t") == {"k"}


def test_spec_write_failure_is_one_line_and_releases_the_lock(tmp_path, monkeypatch):
    """A write that fails (here a 4-byte file size limit, a full disk in small) names spec.json."""
    import resource
    import sys

    run = tmp_path / "run"
    run.mkdir()
    # no bytecode written under the limit: a module first imported inside it would get a cut-off .pyc
    # (Python 3.11 does not check the write: python/cpython#126606)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4, hard))  # Python ignores SIGXFSZ: writes fail with EFBIG
    try:
        with pytest.raises(UserError) as err:
            RunStore.open(run, Spec())
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert str(err.value) == f"{run / 'spec.json'}: cannot write (File too large)"
    assert str(run.resolve()) not in lock._held
    assert sorted(p.name for p in run.iterdir()) == [".lock"]  # no cut-off spec.json, no temporary file


def test_a_writer_that_cannot_open_the_database_gives_its_lock_back(tmp_path):
    run = tmp_path / "run"
    RunStore.open(run, Spec()).close()
    (run / "records.duckdb").write_bytes(b"garbage" * 1000)
    with pytest.raises(UserError, match="cannot open the run database"):
        RunStore.open_existing(run)
    assert str(run.resolve()) not in lock._held


def test_database_refusals_carry_duckdb_first_line(tmp_path):
    import subprocess
    import sys

    run = tmp_path / "run"
    RunStore.open(run, Spec()).close()
    db = run / "records.duckdb"
    with RunStore.open_existing(run, read_only=True) as reader:
        with pytest.raises(duckdb.Error):
            reader.con.execute("CREATE TABLE x (i INTEGER)")  # a reader's connection is read-only
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('ready', flush=True); time.sleep(60)", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        try:
            duckdb.connect(str(db), read_only=True)
        except duckdb.Error as err:  # DuckDB's own words, first line
            first = str(err).splitlines()[0]
        assert "lock" in first.lower()
        with pytest.raises(UserError) as err:
            RunStore.open_existing(run, read_only=True)  # readers take no run lock: DuckDB's lock answers
        assert str(err.value) == (f"{db}: another process holds this run database; wait for it to finish or "
                                  f"use another --out ({first})")
        # --new must not move a database that a process without our lock file (an old version) holds
        with pytest.raises(UserError) as err:
            RunStore.open(run, Spec(n=2), new=True)
        assert str(err.value) == f"{db}: another process holds this run database; wait for it to finish or use another --out"
        assert not (run / ".superseded").exists() and json.loads((run / "spec.json").read_text())["n"] == 1
    finally:
        holder.kill()
        holder.wait()
    db.write_bytes(b"garbage" * 1000)
    try:
        duckdb.connect(str(db), read_only=True)
    except duckdb.Error as err:
        first = str(err).splitlines()[0]
    with pytest.raises(UserError) as err:
        RunStore.open_existing(run, read_only=True)
    assert str(err.value) == f"{db}: cannot open the run database ({first})"


def test_new_moves_the_write_ahead_log_aside_too(tmp_path):
    run = tmp_path / "run"
    RunStore.open(run, Spec()).close()
    (run / "records.duckdb.wal").write_bytes(b"not replayable")  # left by a killed writer: part of the old run
    with RunStore.open(run, Spec(n=2), new=True):
        pass
    [old] = list((run / ".superseded").iterdir())
    assert sorted(p.name for p in old.iterdir()) == ["records.duckdb", "records.duckdb.wal", "spec.json"]


def test_canonical_json_of_a_model_uses_its_json_form():
    import datetime as dt

    class When(BaseModel):
        at: dt.datetime

    # JSON mode writes ISO 8601 with a "T"; str() of a datetime would put a space there
    assert canonical_json(When(at=dt.datetime(2026, 1, 2, 3, 4, 5))) == '{"at":"2026-01-02T03:04:05"}'


def test_a_field_added_later_with_a_default_keeps_old_runs_resumable(tmp_path):
    class Old(BaseModel):
        suite: str = "bite"
        n: int = 1

    class New(Old):
        rules: str = "reference"  # added later; its default is the old behaviour
        ks: tuple[int, ...] = (1, 2)  # a default whose JSON form differs from its Python form

    class NewRequired(Old):
        must: int

    run = tmp_path / "run"
    RunStore.open(run, Old()).close()
    RunStore.preflight(run, New())
    with RunStore.open(run, New()) as store:  # resumes: the stored spec reads as if it had the default
        assert store.spec_dict == {"ks": [1, 2], "n": 1, "rules": "reference", "suite": "bite"}
    (run / "spec.json").write_text(json.dumps({"n": 1, "suite": "bite"}))
    with pytest.raises(UserError, match=r"differs in: rules\)"):
        RunStore.open(run, New(rules="appendix-c"))  # a non-default value is a different run
    with pytest.raises(UserError, match=r"differs in: must\)"):
        RunStore.preflight(run, NewRequired(must=3))  # a required field has no default to assume


def test_defaults_fill_only_missing_fields_never_stored_ones(tmp_path):
    class Old(BaseModel):
        n: int = 1

    class New(Old):
        rules: str = "reference"

    run = tmp_path / "run"
    RunStore.open(run, Old(n=5)).close()
    with RunStore.open(run, New(n=5)) as store:  # the stored n = 5 stands; only `rules` takes its default
        assert store.spec_dict == {"n": 5, "rules": "reference"}
