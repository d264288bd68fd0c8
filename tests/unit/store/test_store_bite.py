"""The run store's promises that a mutant could quietly break, each pinned on a real DuckDB file.

- a failed transaction leaves the table exactly as it was (rolled back, and the store still usable);
- ``replace`` deletes only what its ``where`` selects (and everything when ``where`` is empty), and
  a failed insert after the delete rolls the delete back;
- ``write`` ignores stored keys and returns the rows it added.
Expected rows are written out by hand; nothing here needs a browser or the model.
"""

from __future__ import annotations

import duckdb
import pytest
from pydantic import BaseModel

from tamperbench.store import Record, RunStore, trial_key
from tamperbench.store.run_store import canonical_json, quote_ident


class Spec(BaseModel):
    suite: str = "bite"


class Row(Record):
    kind: str
    value: int


def row(kind: str, value: int, tag: str = "") -> Row:
    return Row(key=trial_key({"kind": kind, "value": value, "tag": tag}), kind=kind, value=value)


def content(store: RunStore, table: str = "t") -> list[tuple[str, int]]:
    return sorted((r["kind"], r["value"]) for r in store.rows(table))


@pytest.fixture
def store(tmp_path):
    s = RunStore.open(tmp_path / "run", Spec())
    yield s
    s.close()


def test_write_returns_rows_added_and_ignores_stored_keys(store):
    assert store.write("t", [row("a", 1), row("a", 2)]) == 2
    assert store.write("t", [row("a", 2), row("b", 3)]) == 1  # a/2 is stored: ignored, not duplicated
    assert store.write("t", []) == 0
    assert content(store) == [("a", 1), ("a", 2), ("b", 3)]
    assert store.count("t") == 3 and store.count("nope") == 0
    assert store.keys("t") == {row("a", 1).key, row("a", 2).key, row("b", 3).key} and store.keys("nope") == set()


def test_failed_transaction_is_rolled_back_and_the_store_stays_usable(store):
    store.write("t", [row("a", 1)])
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction() as con:
            con.execute('INSERT INTO "t" (key, schema_version, created_at, kind, value) '
                        "SELECT 'k2', 1, '2026-01-01', 'a', 2")
            con.execute("DELETE FROM \"t\" WHERE value = 1")
            assert store.count("t") == 1  # inside: one added, one deleted
            raise RuntimeError("boom")
    assert content(store) == [("a", 1)]  # both statements undone
    # not left inside an open transaction: the next write commits and survives a reopen
    assert store.write("t", [row("b", 5)]) == 1
    run = store.run_dir
    store.close()
    with RunStore.open_existing(run, read_only=True) as again:
        assert content(again) == [("a", 1), ("b", 5)]


def test_successful_transaction_commits(store):
    store.write("t", [row("a", 1)])
    with store.transaction() as con:
        con.execute('DELETE FROM "t"')
    assert store.count("t") == 0


def test_replace_deletes_only_what_where_selects(store):
    store.write("t", [row("a", 1), row("a", 2), row("b", 3), row("c", 4)])
    store.replace("t", Row, [row("a", 10)], where="kind = ?", params=["a"])
    assert content(store) == [("a", 10), ("b", 3), ("c", 4)]
    store.replace("t", Row, [], where="kind = ? OR value = ?", params=["c", 3])  # no records: delete only
    assert content(store) == [("a", 10)]
    store.write("t", [row("b", 7)])
    store.replace("t", Row, [row("z", 0)])  # no where: every row goes
    assert content(store) == [("z", 0)]


def test_replace_that_fails_on_insert_rolls_its_delete_back(store):
    store.write("t", [row("a", 1), row("b", 2)])
    dup = row("a", 9)
    with pytest.raises(duckdb.Error):
        store.replace("t", Row, [dup, dup], where="kind = ?", params=["a"])  # duplicate primary key
    assert content(store) == [("a", 1), ("b", 2)]
    assert store.write("t", [row("c", 3)]) == 1


def test_replace_creates_the_table(store):
    store.replace("fresh", Row, [row("a", 1)], where="kind = ?", params=["a"])
    assert content(store, "fresh") == [("a", 1)] and store.has_table("fresh") and not store.has_table("other")


def test_rows_where_and_params(store):
    store.write("t", [row("a", 1), row("b", 2), row("b", 3)])
    got = store.rows("t", "WHERE kind = ? ORDER BY value", ["b"])
    assert [(r["kind"], r["value"]) for r in got] == [("b", 2), ("b", 3)]
    assert store.rows("missing") == []


def test_quote_ident_and_canonical_json_by_hand():
    assert quote_ident('we"ird') == '"we""ird"' and quote_ident("plain") == '"plain"'
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert trial_key({"b": 1, "a": 2}) == trial_key({"a": 2, "b": 1}) != trial_key({"a": 2, "b": 2})


# ------------------------------------------------------------------ the writer lock (store/lock.py)
def test_lock_is_reentrant_in_process_and_released_at_the_last_close(tmp_path):
    import os

    from tamperbench.store import lock

    run = tmp_path / "run"
    k1 = lock.acquire(run)
    k2 = lock.acquire(run)
    assert k1 == k2 == str(run.resolve())
    assert (run / lock.LOCK_FILE).read_text() == f"{os.getpid()}\n"
    lock.release(k1)
    assert lock._held[k1][1] == 1  # still held once
    lock.release(k2)
    assert k1 not in lock._held and (run / lock.LOCK_FILE).read_text() == ""  # pid cleared on release
    lock.release(k1)  # releasing what is not held is a no-op


def test_lock_refuses_a_second_holder_naming_its_pid(tmp_path):
    import fcntl
    import os

    from tamperbench.errors import UserError
    from tamperbench.store import lock

    run = tmp_path / "run"
    run.mkdir()
    fd = os.open(run / lock.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    os.write(fd, b"4242\n")
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: flock conflicts even in-process
    try:
        with pytest.raises(UserError, match=r"another process \(pid 4242\) is writing this run"):
            lock.acquire(run)
        assert str(run.resolve()) not in lock._held
    finally:
        os.close(fd)
    lock.release(lock.acquire(run))  # free again once the holder closed


def test_lock_on_a_file_or_unwritable_place_is_one_line(tmp_path):
    from tamperbench.errors import UserError
    from tamperbench.store import lock

    f = tmp_path / "plain"
    f.write_text("x")
    with pytest.raises(UserError, match="cannot write here"):
        lock.acquire(f)  # mkdir on an existing file
    with pytest.raises(UserError, match="cannot write here"):
        lock.acquire(f / "sub")


def test_move_aside_moves_only_what_exists(tmp_path):
    from tamperbench.store import lock

    run = tmp_path / "run"
    run.mkdir()
    assert lock.move_aside(run, ("a", "b")) is None
    (run / "a").write_text("old a")
    target = lock.move_aside(run, ("a", "b"))
    assert target.parent == run / lock.SUPERSEDED_DIR and (target / "a").read_text() == "old a"
    assert not (run / "a").exists() and not (target / "b").exists()


def test_column_types_from_annotations_by_hand():
    from typing import Literal, Optional, Union

    from tamperbench.store.run_store import _columns, _duck_type

    assert [_duck_type(t) for t in (str, int, float, bool, dict)] == ["VARCHAR", "BIGINT", "DOUBLE", "BOOLEAN", "JSON"]
    assert _duck_type(Optional[int]) == "BIGINT" and _duck_type(float | None) == "DOUBLE"
    assert _duck_type(Union[int, str]) == "JSON" and _duck_type(Literal["a", "b"]) == "VARCHAR"
    assert _duck_type(list[int]) == "BIGINT[]" and _duck_type(tuple[str, ...]) == "VARCHAR[]"
    assert _duck_type(list[bool]) == "BOOLEAN[]" and _duck_type(list[float]) == "DOUBLE[]"
    assert _duck_type(list[dict]) == "JSON" and _duck_type(list) == "JSON" and _duck_type(list[list[int]]) == "JSON"
    assert _columns(Row) == {"key": "VARCHAR", "schema_version": "BIGINT", "provenance_id": "VARCHAR",
                             "created_at": "VARCHAR", "kind": "VARCHAR", "value": "BIGINT"}


def test_tables_and_column_types_of_a_real_file(store):
    store.write("t", [row("a", 1)])
    assert "t" in store.tables() and "meta" in store.tables() and "provenance" in store.tables()
    assert store.column_types("t")["value"] == "BIGINT" and store.column_types("nope") == {}
    assert store.con.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone() == ("1",)


def test_probe_refuses_a_database_another_process_holds_and_passes_others(tmp_path):
    """``--new`` on a run whose database an old process (no lock file) holds: one exact line."""
    import subprocess
    import sys

    import duckdb

    from tamperbench.errors import UserError
    from tamperbench.store.run_store import _probe_unlocked

    db = tmp_path / "records.duckdb"
    duckdb.connect(str(db)).close()
    _probe_unlocked(db)  # free: nothing raised, and the file still opens
    corrupt = tmp_path / "corrupt.duckdb"
    corrupt.write_bytes(b"not a database at all" * 100)
    _probe_unlocked(corrupt)  # foreign/corrupt is moved aside by the caller, not refused
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('ready', flush=True); time.sleep(120)", str(db)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(UserError) as err:
            _probe_unlocked(db)
        assert str(err.value) == (f"{db}: another process holds this run database; wait for it to finish "
                                  "or use another --out")
    finally:
        holder.kill()
        holder.wait()


def test_lock_error_text_is_exact(tmp_path):
    from tamperbench.errors import UserError
    from tamperbench.store import lock

    f = tmp_path / "plain"
    f.write_text("x")
    with pytest.raises(UserError) as err:
        lock.acquire(f / "sub")
    assert str(err.value) == f"{f / 'sub'}: cannot write here (Not a directory)"


def test_move_aside_stamp_format_and_failure_line(tmp_path):
    import re

    from tamperbench.errors import UserError
    from tamperbench.store import lock

    run = tmp_path / "run"
    run.mkdir()
    (run / "a").write_text("x")
    target = lock.move_aside(run, ("a",))
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{6}Z", target.name)
    (run / "b").write_text("y")
    (run / lock.SUPERSEDED_DIR).rename(tmp_path / "moved")
    (run / lock.SUPERSEDED_DIR).write_text("a file where the folder should be")
    with pytest.raises(UserError) as err:
        lock.move_aside(run, ("b",))
    assert str(err.value) == f"{run}: cannot write here (Not a directory)"
