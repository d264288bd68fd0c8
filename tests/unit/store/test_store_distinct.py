"""Which runs count as copies of one another (``store.distinct``): a run is a copy of an earlier one when
every table both hold shares records with it. A table of records computed from settings two runs share
(OWMI's impact-matching calibration, the same for every read-out of one spec) does not make them copies."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from tamperbench.store import Record, RunStore
from tamperbench.store.distinct import distinct_records


class Spec(BaseModel):
    name: str = "distinct"


class Row(Record):
    value: int


def run(path: Path, **tables: list[str]) -> Path:
    with RunStore.open(path, Spec()) as store:
        for table, keys in tables.items():
            store.ensure_table(table, Row)
            store.write(table, [Row(key=k, value=i) for i, k in enumerate(keys)])
    return path


def test_runs_sharing_only_a_derived_table_both_count(tmp_path):
    a = run(tmp_path / "choice", trials=["a1", "a2"], calibration=["cal"])
    b = run(tmp_path / "constrained", trials=["b1", "b2"], calibration=["cal"])
    assert distinct_records([a, b]) == ([a, b], [])


def test_a_copy_and_a_copy_taken_mid_run_count_once(tmp_path):
    a = run(tmp_path / "a", trials=["t1", "t2", "t3"], calibration=["cal"])
    full = run(tmp_path / "full", trials=["t1", "t2", "t3"], calibration=["cal"])
    mid = run(tmp_path / "mid", trials=["t1", "t4"], calibration=["cal"])  # copied after t1, then went on
    kept, notes = distinct_records([a, full, mid])
    assert kept == [a] and len(notes) == 2
    assert "holds 4 record(s) with the same keys as" in notes[0] and "holds 2 record(s)" in notes[1]


def test_tables_restricts_what_is_compared(tmp_path):
    a = run(tmp_path / "a", trials=["t1"], calibration=["cal"])
    b = run(tmp_path / "b", trials=["t1"], calibration=["other"])
    assert distinct_records([a, b])[0] == [a, b]  # every table compared: the calibration tables share nothing
    assert distinct_records([a, b], tables=("trials",))[0] == [a]  # a caller that counts trials only (owmi score)
