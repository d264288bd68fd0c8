"""The run store on a real DuckDB file: typed tables, resume by key, spec refusal, export."""

from __future__ import annotations

import json

import duckdb
import pytest
from pydantic import BaseModel

from tamperbench.errors import UserError
from tamperbench.export.tables import export_run
from tamperbench.store import Record, RunStore, trial_key


class Spec(BaseModel):
    suite: str = "demo"
    n: int = 3


class Trial(Record):
    text: str
    ids: list[int]
    values: list[float]
    extra: dict
    maybe: float | None = None


def make(i: int) -> Trial:
    return Trial(key=trial_key({"i": i}), text=f"t{i}", ids=[i, i + 1], values=[0.5 * i], extra={"i": i})


def test_trial_key_is_canonical():
    assert trial_key({"a": 1, "b": [1, 2]}) == trial_key({"b": [1, 2], "a": 1})
    assert trial_key({"a": 1}) != trial_key({"a": 2})
    assert len(trial_key(Spec())) == 64


def test_write_read_types_and_duplicate_keys_ignored(tmp_path):
    store = RunStore.open(tmp_path / "run", Spec())
    assert store.write("trials", [make(i) for i in range(5)]) == 5
    assert store.write("trials", [make(i) for i in range(3, 8)]) == 3
    rows = sorted(store.rows("trials"), key=lambda r: r["text"])
    assert [r["text"] for r in rows] == [f"t{i}" for i in range(8)]
    assert rows[2]["ids"] == [2, 3] and rows[2]["values"] == [1.0] and rows[2]["extra"] == {"i": 2}
    assert rows[2]["maybe"] is None and rows[2]["schema_version"] == 1
    types = dict(store.con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name='trials'").fetchall())
    assert types["ids"] == "BIGINT[]" and types["values"] == "DOUBLE[]" and types["extra"] == "JSON"
    assert store.keys("trials") == {make(i).key for i in range(8)}
    store.close()


def test_reopen_same_spec_resumes_and_different_spec_is_refused(tmp_path):
    run = tmp_path / "run"
    with RunStore.open(run, Spec()) as store:
        store.write("trials", [make(0)])
    with RunStore.open(run, Spec()) as store:
        assert store.keys("trials") == {make(0).key}
    with pytest.raises(UserError, match="differs in: n"):
        RunStore.open(run, Spec(n=4))
    with RunStore.open(run, Spec(n=4), new=True) as store:
        assert store.keys("trials") == set()
    assert json.loads((run / "spec.json").read_text())["n"] == 4


def test_export_all_formats_join_provenance(tmp_path):
    from tamperbench.models.provenance import ModelProvenance

    prov = ModelProvenance(source="embedded", kind="embedded", resolved_path="/x", sha256="ab" * 32,
                           dtype="float32", device="cpu", torch_version="t", transformers_version="tf",
                           tamperbench_version="0")
    with RunStore.open(tmp_path / "run", Spec()) as store:
        pid = store.put_provenance(prov)
        store.write("trials", [make(i).model_copy(update={"provenance_id": pid}) for i in range(4)])
    for fmt in ("parquet", "csv", "jsonl"):
        out = tmp_path / f"out.{fmt}"
        [(name, path, n)] = export_run(tmp_path / "run", fmt, out)
        assert (name, n) == ("trials", 4) and path.stat().st_size > 0
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["provenance"]["sha256"] == "ab" * 32
    assert duckdb.connect().execute(f"SELECT count(*) FROM '{tmp_path / 'out.parquet'}'").fetchone()[0] == 4


def test_export_errors_name_the_culprit(tmp_path):
    with pytest.raises(UserError, match="not a tamperbench run"):
        export_run(tmp_path / "nope", "csv", tmp_path / "x.csv")
    RunStore.open(tmp_path / "run", Spec()).close()
    with pytest.raises(UserError, match="--format"):
        export_run(tmp_path / "run", "xlsx", tmp_path / "x.xlsx")
    with pytest.raises(UserError, match="no records"):
        export_run(tmp_path / "run", "csv", tmp_path / "x.csv")
