"""Export every record table of a run to Parquet, CSV or JSON lines, provenance joined in.

Records carry only ``provenance_id``; the export joins the provenance table so each exported
row stands alone (model source, file hash, dtype, device, library versions) without the run dir.

WHY so careful: a run directory is often someone else's (shared to reproduce a figure), so its
table names are untrusted data. Only record tables are exported: a plain identifier name and the
columns every :class:`~tamperbench.store.Record` has. Identifiers are quoted and the output path is
a bound parameter, never spliced into SQL, so neither can run a statement or write elsewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from tamperbench.safeio.csv_cells import defuse_table
from tamperbench.errors import UserError, damaged_database
from tamperbench.store import Record, RunStore
from tamperbench.store.run_store import INTERNAL_TABLES, quote_ident

FORMATS = ("parquet", "csv", "jsonl")
INTERNAL = INTERNAL_TABLES
_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
_RECORD_COLUMNS = set(Record.model_fields)
_OPTIONS = {"parquet": "FORMAT parquet", "csv": "FORMAT csv, HEADER", "jsonl": "FORMAT json"}


def record_tables(store: RunStore) -> tuple[list[str], list[str]]:
    """(record tables, other tables) of a run: only the first kind is ever exported."""
    known: list[str] = []
    other: list[str] = []
    for name in store.tables():
        if name in INTERNAL:
            continue
        cols = set(store.column_types(name))
        (known if _NAME.fullmatch(name) and _RECORD_COLUMNS <= cols else other).append(name)
    return known, other


def _target(out: Path, name: str, fmt: str, several: bool) -> Path:
    if out.is_dir():
        raise UserError(f"--out: {out} is a directory; give a file name such as {out / ('export.' + fmt)}")
    return out.with_name(f"{out.stem}.{name}{out.suffix or '.' + fmt}") if several else out


def export_run(run_dir: Path, fmt: str, out: Path, table: str | None = None,
               raw: bool = False) -> list[tuple[str, Path, int]]:
    """Write one file per record table (``out`` itself when only one table is exported).

    CSV text cells that a spreadsheet would run as formulas get a leading apostrophe
    (:mod:`tamperbench.safeio.csv_cells`) unless ``raw``."""
    if fmt not in FORMATS:
        raise UserError(f"--format: '{fmt}' is not one of {', '.join(FORMATS)}")
    store = RunStore.open_existing(run_dir, read_only=True)
    try:
        tables, other = record_tables(store)
        if table is not None:
            if table not in tables:
                why = "is not a record table of" if table in other else "is not in"
                raise UserError(f"--table: {table!r} {why} {run_dir} (record tables: {', '.join(tables) or 'none'})")
            tables = [table]
        elif other:
            raise UserError(f"{run_dir}: table {other[0]!r} is not a tamperbench record table; refusing to export "
                            f"it (export the others one at a time with --table: {', '.join(tables) or 'none'})")
        if not tables:
            raise UserError(f"{run_dir}: the run has no records to export")
        targets = [(name, _target(out, name, fmt, len(tables) > 1)) for name in tables]
        all_tables = set(store.tables())
        written = []
        for name, target in targets:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise UserError(f"--out: cannot create {target.parent} ({err.strerror or err})") from None
            if target.is_dir():
                raise UserError(f"--out: {target} is a directory; give a file name")
            ident = quote_ident(name)
            if "provenance_id" in store.column_types(name) and "provenance" in all_tables:
                query = (f"SELECT r.*, p.record AS provenance FROM {ident} r "
                         "LEFT JOIN provenance p ON p.id = r.provenance_id ORDER BY r.key")
            else:
                query = f"SELECT * FROM {ident} ORDER BY key"
            try:
                if fmt == "csv" and not raw:
                    store.con.register("__tb_csv_defused", defuse_table(store.con.sql(query).to_arrow_table()))
                    query = "SELECT * FROM __tb_csv_defused"
                store.con.execute(f"COPY ({query}) TO $target ({_OPTIONS[fmt]})", {"target": str(target)})
            except duckdb.IOException as err:
                if (damage := damaged_database(err)) is not None:  # reading the run failed, not writing --out
                    raise UserError(damage) from None
                raise UserError(f"--out: cannot write {target} ({str(err).splitlines()[0]})") from None
            except duckdb.Error as err:  # a damaged or hand-edited run database: say which table
                raise UserError(f"{run_dir}: cannot export table {name!r} ({str(err).splitlines()[0]})") from None
            finally:
                if fmt == "csv" and not raw:
                    store.con.unregister("__tb_csv_defused")
            written.append((name, target, store.count(name)))
        return written
    finally:
        store.close()
