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

import contextlib
import datetime as dt
import hashlib
import json
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
import pyarrow as pa
from pydantic import BaseModel, Field

from tamperbench.errors import UserError, damaged_database
from tamperbench.safeio.files import atomic_write, refuse_links
from tamperbench.store import lock as run_lock
from tamperbench.store.spec_check import refuse_other_spec

SCHEMA_VERSION = 1
SPEC_FILE = "spec.json"
DB_FILE = "records.duckdb"
# the files a writer opens, moves or replaces: none may be a symbolic link (it would write elsewhere)
WRITER_FILES = (SPEC_FILE, DB_FILE, DB_FILE + ".wal", run_lock.LOCK_FILE, run_lock.SUPERSEDED_DIR)


# tables of a run that hold no records: the model's provenance, the schema's stamp, each process's session
INTERNAL_TABLES = frozenset({"provenance", "meta", "sessions"})


def quote_ident(name: str) -> str:
    """A SQL identifier, double-quoted with inner quotes doubled: a table name is data, never SQL."""
    return '"' + name.replace('"', '""') + '"'


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


def read_spec(spec_path: Path, hint: str = "") -> dict:
    """The stored spec.json as a dict; a garbage (or oversized) file is one line naming it, never a traceback."""
    from tamperbench.spec_base import SPEC_FILE_MAX_BYTES

    try:
        from tamperbench.safeio.files import read_capped

        stored = json.loads(read_capped(spec_path, SPEC_FILE_MAX_BYTES, "spec.json").decode("utf-8"))
    except OSError as err:
        raise UserError(f"{spec_path}: cannot read ({err.strerror or err})") from None
    except (ValueError, UnicodeDecodeError) as err:
        why = err.msg if isinstance(err, json.JSONDecodeError) else str(err).split(":")[0]
        raise UserError(f"{spec_path}: not valid JSON ({why}){hint}") from None
    if not isinstance(stored, dict):
        raise UserError(f"{spec_path}: not a JSON object{hint}")
    return stored


def _check_version(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a database written by another store schema version (its columns may mean other things)."""
    try:
        row = con.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
    except duckdb.Error as err:
        if (damage := damaged_database(err, path)) is not None:
            raise UserError(damage) from None
        row = None
    found = row[0] if row else None
    if found != str(SCHEMA_VERSION):
        what = f"schema version {found}" if found is not None else "no schema version"
        raise UserError(f"{path}: written with store {what}; this tamperbench reads schema version "
                        f"{SCHEMA_VERSION} (use the tamperbench version that wrote it, or export from it)")


def _probe_unlocked(db: Path) -> None:
    """Refuse ``--new`` while a process without our lock file (an older version) holds ``db``.

    A database that cannot be opened for another reason (corrupt, foreign) is still moved aside.
    """
    try:
        duckdb.connect(str(db)).close()
    except duckdb.Error as err:
        if "lock" in str(err).lower():
            raise UserError(f"{db}: another process holds this run database; wait for it to finish "
                            "or use another --out") from None


class RunStore:
    """One run directory, opened by one writer process at a time."""

    def __init__(self, run_dir: Path, con: duckdb.DuckDBPyConnection, spec_dict: dict,
                 lock_key: str | None = None):
        self.run_dir = run_dir
        self.con = con
        self.spec_dict = spec_dict
        self._tables: dict[str, dict[str, str]] = {}
        self._lock_key = lock_key

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def preflight(cls, run_dir: str | Path, spec: BaseModel, *, new: bool = False) -> None:
        """The checks of :meth:`open` that need no model, run before loading one; creates nothing.

        Refuses an unwritable run directory, one another process is writing, and (without ``new``)
        one that holds a different spec, each as one line, so a bad ``--out`` costs no model load.
        """
        run_dir = Path(run_dir)
        refuse_links(run_dir, WRITER_FILES)
        run_lock.preflight(run_dir)
        spec_path = run_dir / SPEC_FILE
        if spec_path.exists() and not new:
            stored = read_spec(spec_path, hint="; pass --new to start this run afresh")
            refuse_other_spec(run_dir, stored, spec, json.loads(canonical_json(spec)))

    @classmethod
    def open(cls, run_dir: str | Path, spec: BaseModel, *, new: bool = False) -> "RunStore":
        """Open (or create) a run for ``spec``; refuse a different spec unless ``new``.

        The run's writer lock is taken before anything is read, moved or written; with ``new`` the
        old run is moved to ``RUN/.superseded/<time>/``, never deleted.
        """
        run_dir = Path(run_dir)
        spec_dict = json.loads(canonical_json(spec))
        spec_path = run_dir / SPEC_FILE
        refuse_links(run_dir, WRITER_FILES)
        key = run_lock.acquire(run_dir)
        try:
            if spec_path.exists() and not new:
                stored = read_spec(spec_path, hint="; pass --new to start this run afresh")
                refuse_other_spec(run_dir, stored, spec, spec_dict)
            if new:
                if (run_dir / DB_FILE).exists():
                    _probe_unlocked(run_dir / DB_FILE)
                run_lock.move_aside(run_dir, (SPEC_FILE, DB_FILE, DB_FILE + ".wal"))
            atomic_write(spec_path, json.dumps(spec_dict, indent=2, sort_keys=True))
            return cls(run_dir, cls._connect(run_dir / DB_FILE), spec_dict, key)
        except BaseException:
            run_lock.release(key)
            raise

    @classmethod
    def open_existing(cls, run_dir: str | Path, *, read_only: bool = False) -> "RunStore":
        """Open a finished or interrupted run for reading (tables, export) or updating (judging).

        Writers (``read_only=False``) hold the run's lock while open; readers do not need it.
        """
        run_dir = Path(run_dir)
        spec_path = run_dir / SPEC_FILE
        if not spec_path.is_file() or not (run_dir / DB_FILE).is_file():
            raise UserError(f"{run_dir}: not a tamperbench run directory (no {SPEC_FILE} / {DB_FILE})")
        spec_dict = read_spec(spec_path)
        if not read_only:
            refuse_links(run_dir, WRITER_FILES)
        key = None if read_only else run_lock.acquire(run_dir)
        try:
            return cls(run_dir, cls._connect(run_dir / DB_FILE, read_only=read_only), spec_dict, key)
        except BaseException:
            if key is not None:
                run_lock.release(key)
            raise

    @staticmethod
    def _connect(path: Path, read_only: bool = False, check_version: bool = True) -> duckdb.DuckDBPyConnection:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            if (damage := damaged_database(err, path)) is not None:
                raise UserError(damage) from None
            if "lock" in first.lower():
                raise UserError(f"{path}: another process holds this run database; wait for it to "
                                f"finish or use another --out ({first})") from None
            raise UserError(f"{path}: cannot open the run database ({first})") from None
        try:
            if not read_only:
                # Stamp the schema version only on a brand-new database, in one transaction with its
                # first tables: an existing database without a version row is refused by
                # _check_version below (a writer must not adopt it silently while readers refuse it).
                fresh = con.execute("SELECT count(*) FROM information_schema.tables").fetchone() == (0,)
                con.execute("BEGIN")
                con.execute("CREATE TABLE IF NOT EXISTS provenance (id VARCHAR PRIMARY KEY, record JSON)")
                con.execute("CREATE TABLE IF NOT EXISTS meta (name VARCHAR PRIMARY KEY, value VARCHAR)")
                if fresh:
                    con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
                con.execute("COMMIT")
            if check_version:
                _check_version(con, path)
        except BaseException:
            con.close()
            raise
        return con

    # -- tables --------------------------------------------------------------------------
    def ensure_table(self, table: str, model: type[BaseModel]) -> None:
        cols = _columns(model)
        if "key" not in cols:
            raise TypeError(f"{model.__name__} must have a 'key' field (subclass Record)")
        body = ", ".join(f'{quote_ident(c)} {t}{" PRIMARY KEY" if c == "key" else ""}' for c, t in cols.items())
        self.con.execute(f"CREATE TABLE IF NOT EXISTS {quote_ident(table)} ({body})")
        # a field added to a record later with a default (e.g. sleight's batch_rows) becomes a column of
        # a table written before it, NULL in its old rows: resuming an old run must not fail on insert
        have = self.column_types(table)
        for c, t in cols.items():
            if c not in have and not model.model_fields[c].is_required():
                self.con.execute(f"ALTER TABLE {quote_ident(table)} ADD COLUMN {quote_ident(c)} {t}")
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
        return {k for (k,) in self.con.execute(f"SELECT key FROM {quote_ident(table)}").fetchall()}

    def _arrow_batch(self, table: str, records: list[BaseModel]) -> tuple[pa.Table, str, str]:
        """Records as one Arrow table, plus the column list and the typed SELECT that inserts them."""
        cols = self._tables[table]
        rows = []
        for rec in records:
            d = rec.model_dump(mode="json")
            rows.append({c: json.dumps(d[c]) if t == "JSON" else d[c] for c, t in cols.items()})
        names = ", ".join(quote_ident(c) for c in cols)
        select = ", ".join(f"CAST({quote_ident(c)} AS {t})" for c, t in cols.items())
        return pa.Table.from_pylist(rows), names, select

    @contextlib.contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """``with store.transaction() as con:`` commits on success, rolls back on any exception."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def _transaction(self, statements: list[tuple[str, list]], batch: pa.Table | None) -> None:
        if batch is not None:  # (an empty Arrow table cannot be registered: replace() with no records)
            self.con.register("batch", batch)
        try:
            with self.transaction() as con:
                for sql, params in statements:
                    con.execute(sql, params)
        finally:
            if batch is not None:
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
        self._transaction([(f"INSERT OR IGNORE INTO {quote_ident(table)} ({names}) SELECT {select} FROM batch", [])],
                          batch)
        return self.count(table) - before

    def replace(self, table: str, model: type[BaseModel], records: Iterable[BaseModel], where: str = "",
                params: list | None = None) -> None:
        """Delete rows matching ``where`` (all rows when empty) and insert ``records``, in ONE transaction.

        For derived data (verdicts, agreement, human labels) that must be replaced when its inputs
        change, without a reader ever seeing the table half-replaced. ``where`` is SQL written by
        the caller (never user text): values go in ``params``.
        """
        self.ensure_table(table, model)
        records = list(records)
        statements = [(f"DELETE FROM {quote_ident(table)} {('WHERE ' + where) if where else ''}", params or [])]
        batch = None
        if records:
            batch, names, select = self._arrow_batch(table, records)
            statements.append((f"INSERT INTO {quote_ident(table)} ({names}) SELECT {select} FROM batch", []))
        self._transaction(statements, batch)

    def count(self, table: str) -> int:
        if not self.has_table(table):
            return 0
        return self.con.execute(f"SELECT count(*) FROM {quote_ident(table)}").fetchall()[0][0]

    def rows(self, table: str, where: str = "", params: list | None = None) -> list[dict]:
        """Rows as dicts, JSON columns decoded (the column types are read once per call)."""
        if not self.has_table(table):
            return []
        cur = self.con.execute(f"SELECT * FROM {quote_ident(table)} {where}", params or [])
        names = [d[0] for d in cur.description]
        fetched = cur.fetchall()
        types = self.column_types(table)
        json_cols = [i for i, n in enumerate(names) if types.get(n) == "JSON"]
        out = []
        for row in fetched:
            values = list(row)
            for i in json_cols:
                if isinstance(values[i], str):
                    values[i] = json.loads(values[i])
            out.append(dict(zip(names, values)))
        return out

    def column_types(self, table: str) -> dict[str, str]:
        """Column name -> DuckDB type name of ``table`` (empty when it does not exist)."""
        q = "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?"
        return dict(self.con.execute(q, [table]).fetchall())

    def tables(self) -> list[str]:
        q = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1"
        return [t for (t,) in self.con.execute(q).fetchall()]

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            if self._lock_key is not None:
                run_lock.release(self._lock_key)
                self._lock_key = None

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
