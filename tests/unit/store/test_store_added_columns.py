"""A record field added later with a default (Sleight of Word's ``batch_rows`` / ``batch_by``) must
not make a run written before it unresumable: ``ensure_table`` adds the column to the old table
(NULL in its old rows) and new records are written beside the old ones. A real DuckDB run
directory; the old record shape is declared here as it was."""

from __future__ import annotations

from pydantic import BaseModel

from tamperbench.sleight.records import SleightTrial
from tamperbench.store import RunStore
from tamperbench.store.run_store import Record


class _Spec(BaseModel):
    name: str = "added columns"


class _Old(Record):
    text: str


class _New(Record):
    text: str
    batch_rows: int | None = None
    batch_by: str | None = None


def test_old_table_gains_the_new_optional_columns(tmp_path):
    run = tmp_path / "run"
    store = RunStore.open(run, _Spec(), new=True)
    store.ensure_table("t", _Old)
    store.write("t", [_Old(key="a", text="old")])
    store.close()
    store = RunStore.open(run, _Spec())  # resumed by the newer code
    try:
        store.ensure_table("t", _New)
        assert store.write("t", [_New(key="b", text="new", batch_rows=263, batch_by="memory")]) == 1
        rows = {r["key"]: r for r in store.rows("t")}
        assert (rows["a"]["batch_rows"], rows["a"]["batch_by"]) == (None, None)
        assert (rows["b"]["batch_rows"], rows["b"]["batch_by"]) == (263, "memory")
        assert store.column_types("t")["batch_rows"] == "BIGINT"
        assert _New(**{k: v for k, v in rows["a"].items()}).batch_rows is None  # old rows still read back
    finally:
        store.close()


def test_sleight_records_carry_the_batch_fields_optionally():
    fields = SleightTrial.model_fields
    assert not fields["batch_rows"].is_required() and fields["batch_rows"].default is None
    assert not fields["batch_by"].is_required() and fields["batch_by"].default is None
