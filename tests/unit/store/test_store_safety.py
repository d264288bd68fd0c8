"""Store safety on real DuckDB files: rollback, scoped replace, schema version, writer lock, --new.

The lock tests use real second processes (a lock held in this process is re-entrant by design).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import duckdb
import pytest
from pydantic import BaseModel

from tamperbench.errors import UserError
from tamperbench.store import Record, RunStore, trial_key


class Spec(BaseModel):
    suite: str = "demo"
    n: int = 1


class Row(Record):
    group: str
    value: int


def rows(n: int, group: str = "a", start: int = 0) -> list[Row]:
    return [Row(key=trial_key({"g": group, "i": i}), group=group, value=i) for i in range(start, start + n)]


def test_failed_transaction_rolls_back(tmp_path):
    with RunStore.open(tmp_path / "run", Spec()) as store:
        store.write("t", rows(3))
        with pytest.raises(duckdb.Error):
            with store.transaction() as con:
                con.execute('DELETE FROM "t"')
                con.execute('INSERT INTO "t" (key) VALUES (NULL)')  # the primary key refuses NULL
        assert store.count("t") == 3  # the DELETE was rolled back with the failed INSERT
        with pytest.raises(ZeroDivisionError):
            with store.transaction() as con:
                con.execute('DELETE FROM "t"')
                raise ZeroDivisionError("a Python error inside the block rolls back too")
        assert store.count("t") == 3


def test_replace_with_a_bad_where_changes_nothing(tmp_path):
    with RunStore.open(tmp_path / "run", Spec()) as store:
        store.write("t", rows(3))
        with pytest.raises(duckdb.Error):
            store.replace("t", Row, rows(1, "b"), where="no_such_column = ?", params=[1])
        assert sorted(r["value"] for r in store.rows("t")) == [0, 1, 2]


def test_replace_deletes_only_what_where_selects(tmp_path):
    with RunStore.open(tmp_path / "run", Spec()) as store:
        store.write("t", rows(3, "a") + rows(4, "b"))
        store.replace("t", Row, rows(2, "a", start=10), where="\"group\" = ?", params=["a"])
        got = sorted((r["group"], r["value"]) for r in store.rows("t"))
        assert got == [("a", 10), ("a", 11), ("b", 0), ("b", 1), ("b", 2), ("b", 3)]
        store.replace("t", Row, [], where="\"group\" = ? AND value >= ?", params=["b", 2])
        assert sorted((r["group"], r["value"]) for r in store.rows("t")) == [("a", 10), ("a", 11), ("b", 0), ("b", 1)]


def test_rows_reads_column_types_once_per_call(tmp_path, monkeypatch):
    with RunStore.open(tmp_path / "run", Spec()) as store:
        store.write("t", rows(50))
        calls = []
        real = RunStore.column_types
        monkeypatch.setattr(RunStore, "column_types", lambda self, t: calls.append(t) or real(self, t))
        assert len(store.rows("t")) == 50
        assert calls == ["t"]


def test_other_schema_version_is_refused_naming_both(tmp_path):
    run = tmp_path / "run"
    with RunStore.open(run, Spec()) as store:
        store.write("t", rows(1))
    con = duckdb.connect(str(run / "records.duckdb"))
    con.execute("UPDATE meta SET value = '7' WHERE name = 'schema_version'")
    con.close()
    for opener in (lambda: RunStore.open_existing(run, read_only=True), lambda: RunStore.open(run, Spec())):
        with pytest.raises(UserError, match=r"schema version 7; this tamperbench reads schema version 1"):
            opener()


def test_a_database_without_a_version_is_refused_by_writers_as_by_readers(tmp_path):
    """A writer used to stamp version 1 on any database lacking the row (INSERT OR IGNORE), so a
    foreign database was adopted by a writer while readers refused it."""
    run = tmp_path / "run"
    with RunStore.open(run, Spec()) as store:
        store.write("t", rows(1))
    con = duckdb.connect(str(run / "records.duckdb"))
    con.execute("DELETE FROM meta WHERE name = 'schema_version'")
    con.close()
    for opener in (lambda: RunStore.open_existing(run, read_only=True), lambda: RunStore.open_existing(run),
                   lambda: RunStore.open(run, Spec())):
        with pytest.raises(UserError, match=r"written with store no schema version"):
            opener()
    con = duckdb.connect(str(run / "records.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM meta").fetchone()[0] == 0  # nothing was stamped
    con.close()


def test_garbage_spec_and_garbage_database_are_one_line(tmp_path):
    run = tmp_path / "run"
    RunStore.open(run, Spec()).close()
    (run / "spec.json").write_bytes(b"\xff\xfe not json")
    with pytest.raises(UserError, match="spec.json: not valid JSON"):
        RunStore.open_existing(run, read_only=True)
    (run / "spec.json").write_text("[1, 2]")
    with pytest.raises(UserError, match="not a JSON object"):
        RunStore.open_existing(run, read_only=True)
    (run / "spec.json").write_text("{}")
    (run / "records.duckdb").write_bytes(b"garbage" * 1000)
    with pytest.raises(UserError, match="cannot open the run database"):
        RunStore.open_existing(run, read_only=True)


def test_new_moves_the_old_run_aside(tmp_path):
    run = tmp_path / "run"
    with RunStore.open(run, Spec()) as store:
        store.write("t", rows(3))
    with RunStore.open(run, Spec(n=2), new=True) as store:
        assert store.count("t") == 0
    [old] = list((run / ".superseded").iterdir())
    assert json.loads((old / "spec.json").read_text())["n"] == 1
    assert duckdb.connect(str(old / "records.duckdb"), read_only=True).execute('SELECT count(*) FROM "t"').fetchone()[0] == 3


HOLDER = textwrap.dedent(
    """
    import sys
    from pydantic import BaseModel
    from tamperbench.store import Record, RunStore, trial_key

    class Spec(BaseModel):
        suite: str = "demo"
        n: int = 1

    class Row(Record):
        group: str
        value: int

    store = RunStore.open(sys.argv[1], Spec())
    store.write("t", [Row(key=trial_key({"i": i}), group="first", value=i) for i in range(3)])
    print("holding", flush=True)
    sys.stdin.readline()
    store.write("t", [Row(key=trial_key({"i": i}), group="first", value=i) for i in range(3, 6)])
    store.close()
    print("done", flush=True)
    """
)


def test_second_process_new_is_refused_while_the_first_writes(tmp_path):
    """Two real processes: --new in the second must not touch what the first is writing."""
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        for new in (True, False):
            with pytest.raises(UserError, match=rf"another process \(pid {holder.pid}\) is writing this run"):
                RunStore.open(run, Spec(n=2), new=new)
            with pytest.raises(UserError, match=rf"another process \(pid {holder.pid}\) is writing this run"):
                RunStore.preflight(run, Spec(n=2), new=new)  # the same refusal, before any model loads
        assert not (run / ".superseded").exists()
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "done"
    finally:
        holder.kill() if holder.poll() is None else None
        holder.wait()
    with RunStore.open_existing(run, read_only=True) as store:
        assert sorted(r["value"] for r in store.rows("t")) == [0, 1, 2, 3, 4, 5]


def test_preflight_refuses_what_open_refuses_and_creates_nothing(tmp_path):
    """The runners' check before loading a model: a different spec, a file in the way, an
    unwritable parent. It never creates the run directory, and passes where open would."""
    run = tmp_path / "deep" / "run"
    RunStore.preflight(run, Spec())
    assert not (tmp_path / "deep").exists()
    with RunStore.open(run, Spec()) as store:
        store.write("t", rows(1))
    RunStore.preflight(run, Spec())  # same spec: resumable
    with pytest.raises(UserError, match=r"different spec \(differs in: n\)"):
        RunStore.preflight(run, Spec(n=2))
    RunStore.preflight(run, Spec(n=2), new=True)
    assert sorted(p.name for p in run.iterdir()) == sorted([".lock", "records.duckdb", "spec.json"])
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UserError, match="exists and is not a directory"):
        RunStore.preflight(tmp_path / "afile", Spec())
    with pytest.raises(UserError, match="is not a directory"):
        RunStore.preflight(tmp_path / "afile" / "run", Spec())
