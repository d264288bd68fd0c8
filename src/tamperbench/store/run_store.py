"""A run directory: ``spec.json`` (the frozen spec) + ``records.duckdb`` (trial records).

Why DuckDB: a real transactional database in one file, columnar, with Parquet/CSV export
built in. Each table is generated from a pydantic ``Record`` subclass, so suites declare
their record shape once and get typed columns (not a JSON blob) that SQL and pandas can read.

Resume: every record has ``key`` = hash of its canonical trial spec (the primary key). Suites
ask ``keys(table)`` and skip what is stored; ``write`` inserts one batch in one transaction and
ignores keys already present, so a batch replayed after a crash never duplicates. A SIGKILL
loses at most the batch in flight: DuckDB's write-ahead log is replayed on the next open.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import types
import typing
from pathlib import Path
from typing import Any, Iterable

import duckdb
import pyarrow as pa
from pydantic import BaseModel, Field

from tamperbench.errors import UserError

SCHEMA_VERSION = 1
SPEC_FILE = "spec.json"
DB_FILE = "records.duckdb"


def canonical_json(obj: Any) -> str:
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def trial_key(obj: Any) -> str:
    """sha256 of the canonical JSON of a trial spec: same trial, same key, on any machine."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class Record(BaseModel):
    """Base of every stored record. Subclasses add their own typed fields."""

    key: str
    schema_version: int = SCHEMA_VERSION
    provenance_id: str = ""
    created_at: str = Field(default_factory=_now)


def _duck_type(annotation: Any) -> str:
    """Map a pydantic field annotation to a DuckDB column type (JSON for anything nested)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _duck_type(args[0]) if len(args) == 1 else "JSON"
    if origin is typing.Literal:
        return "VARCHAR"
    if origin in (list, tuple):
        (inner, *_rest) = typing.get_args(annotation) or (Any,)
        inner_type = _duck_type(inner)
        return f"{inner_type}[]" if inner_type in ("BIGINT", "DOUBLE", "VARCHAR", "BOOLEAN") else "JSON"
    return {str: "VARCHAR", int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN"}.get(annotation, "JSON")


def _columns(model: type[BaseModel]) -> dict[str, str]:
    return {name: _duck_type(f.annotation) for name, f in model.model_fields.items()}


class RunStore:
    """One run directory, opened by one writer process at a time."""

    def __init__(self, run_dir: Path, con: duckdb.DuckDBPyConnection, spec_dict: dict):
        self.run_dir = run_dir
        self.con = con
        self.spec_dict = spec_dict
        self._tables: dict[str, dict[str, str]] = {}

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def open(cls, run_dir: str | Path, spec: BaseModel, *, new: bool = False) -> "RunStore":
        """Open (or create) a run for ``spec``; refuse a different spec unless ``new``."""
        run_dir = Path(run_dir)
        spec_dict = json.loads(canonical_json(spec))
        spec_path = run_dir / SPEC_FILE
        if spec_path.exists() and not new:
            try:
                stored = json.loads(spec_path.read_text())
            except ValueError:
                raise UserError(f"{spec_path}: not valid JSON; pass --new to start this run afresh") from None
            if stored != spec_dict:
                diff = sorted(k for k in set(stored) | set(spec_dict) if stored.get(k) != spec_dict.get(k))
                raise UserError(
                    f"{run_dir}: holds a run with a different spec (differs in: {', '.join(diff)}); "
                    "use another --out or pass --new to replace it"
                )
        if new:
            for name in (SPEC_FILE, DB_FILE, DB_FILE + ".wal"):
                (run_dir / name).unlink(missing_ok=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        tmp = spec_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(spec_dict, indent=2, sort_keys=True))
        tmp.replace(spec_path)
        return cls(run_dir, cls._connect(run_dir / DB_FILE), spec_dict)

    @classmethod
    def open_existing(cls, run_dir: str | Path, *, read_only: bool = False) -> "RunStore":
        """Open a finished or interrupted run for reading (tables, export, judging)."""
        run_dir = Path(run_dir)
        spec_path = run_dir / SPEC_FILE
        if not spec_path.is_file() or not (run_dir / DB_FILE).is_file():
            raise UserError(f"{run_dir}: not a tamperbench run directory (no {SPEC_FILE} / {DB_FILE})")
        return cls(run_dir, cls._connect(run_dir / DB_FILE, read_only=read_only), json.loads(spec_path.read_text()))

    @staticmethod
    def _connect(path: Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as err:
            raise UserError(f"{path}: cannot open the run database ({str(err).splitlines()[0]})") from None
        if not read_only:
            con.execute("CREATE TABLE IF NOT EXISTS provenance (id VARCHAR PRIMARY KEY, record JSON)")
            con.execute("CREATE TABLE IF NOT EXISTS meta (name VARCHAR PRIMARY KEY, value VARCHAR)")
            con.execute(
                "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
            )
        return con

    # -- tables --------------------------------------------------------------------------
    def ensure_table(self, table: str, model: type[BaseModel]) -> None:
        cols = _columns(model)
        if "key" not in cols:
            raise TypeError(f"{model.__name__} must have a 'key' field (subclass Record)")
        body = ", ".join(f'"{c}" {t}{" PRIMARY KEY" if c == "key" else ""}' for c, t in cols.items())
        self.con.execute(f'CREATE TABLE IF NOT EXISTS "{table}" ({body})')
        self._tables[table] = cols

    def has_table(self, table: str) -> bool:
        q = "SELECT count(*) FROM information_schema.tables WHERE table_name = ?"
        return self.con.execute(q, [table]).fetchall()[0][0] > 0

    def put_provenance(self, provenance: BaseModel) -> str:
        pid = provenance.id  # type: ignore[attr-defined]
        self.con.execute("INSERT OR IGNORE INTO provenance VALUES (?, ?)", [pid, canonical_json(provenance)])
        return pid

    def keys(self, table: str) -> set[str]:
        if not self.has_table(table):
            return set()
        return {k for (k,) in self.con.execute(f'SELECT key FROM "{table}"').fetchall()}

    def _arrow_batch(self, table: str, records: list[BaseModel]) -> tuple[pa.Table, str, str]:
        """Records as one Arrow table, plus the column list and the typed SELECT that inserts them."""
        cols = self._tables[table]
        rows = []
        for rec in records:
            d = rec.model_dump(mode="json")
            rows.append({c: json.dumps(d[c]) if t == "JSON" else d[c] for c, t in cols.items()})
        names = ", ".join(f'"{c}"' for c in cols)
        select = ", ".join(f'CAST("{c}" AS {t})' for c, t in cols.items())
        return pa.Table.from_pylist(rows), names, select

    def _transaction(self, statements: list[tuple[str, list]], batch: pa.Table | None) -> None:
        self.con.register("batch", batch if batch is not None else pa.table({}))
        self.con.execute("BEGIN TRANSACTION")
        try:
            for sql, params in statements:
                self.con.execute(sql, params)
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        finally:
            self.con.unregister("batch")

    def write(self, table: str, records: Iterable[BaseModel]) -> int:
        """Insert one batch in one transaction; keys already stored are ignored. Returns rows added.

        One Arrow batch per call: DuckDB ingests it columnar, far faster than executemany.
        """
        records = list(records)
        if not records:
            return 0
        if table not in self._tables:
            self.ensure_table(table, type(records[0]))
        batch, names, select = self._arrow_batch(table, records)
        before = self.count(table)
        self._transaction([(f'INSERT OR IGNORE INTO "{table}" ({names}) SELECT {select} FROM batch', [])], batch)
        return self.count(table) - before

    def replace(self, table: str, model: type[BaseModel], records: Iterable[BaseModel], where: str = "",
                params: list | None = None) -> None:
        """Delete rows matching ``where`` (all rows when empty) and insert ``records``, in ONE transaction.

        For derived data (verdicts, agreement, human labels) that must be replaced when its inputs
        change, without a reader ever seeing the table half-replaced.
        """
        self.ensure_table(table, model)
        records = list(records)
        statements = [(f'DELETE FROM "{table}" {("WHERE " + where) if where else ""}', params or [])]
        batch = None
        if records:
            batch, names, select = self._arrow_batch(table, records)
            statements.append((f'INSERT INTO "{table}" ({names}) SELECT {select} FROM batch', []))
        self._transaction(statements, batch)

    def count(self, table: str) -> int:
        if not self.has_table(table):
            return 0
        return self.con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0]

    def rows(self, table: str, where: str = "", params: list | None = None) -> list[dict]:
        if not self.has_table(table):
            return []
        cur = self.con.execute(f'SELECT * FROM "{table}" {where}', params or [])
        names = [d[0] for d in cur.description]
        out = []
        for row in cur.fetchall():
            d = dict(zip(names, row))
            for c, t in self._column_types(table).items():
                if t == "JSON" and isinstance(d.get(c), str):
                    d[c] = json.loads(d[c])
            out.append(d)
        return out

    def _column_types(self, table: str) -> dict[str, str]:
        q = "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?"
        return dict(self.con.execute(q, [table]).fetchall())

    def tables(self) -> list[str]:
        q = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1"
        return [t for (t,) in self.con.execute(q).fetchall()]

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
