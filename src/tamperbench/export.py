"""Export every record table of a run to Parquet, CSV or JSON lines, provenance joined in.

Records carry only ``provenance_id``; the export joins the provenance table so each exported
row stands alone (model source, file hash, dtype, device, library versions) without the run dir.
"""

from __future__ import annotations

from pathlib import Path

from tamperbench.errors import UserError
from tamperbench.store import RunStore

FORMATS = ("parquet", "csv", "jsonl")
INTERNAL = {"provenance", "meta"}


def export_run(run_dir: Path, fmt: str, out: Path, table: str | None = None) -> list[tuple[str, Path, int]]:
    """Write one file per record table (``out`` itself when only one table is exported)."""
    if fmt not in FORMATS:
        raise UserError(f"--format: '{fmt}' is not one of {', '.join(FORMATS)}")
    store = RunStore.open_existing(run_dir, read_only=True)
    try:
        tables = [t for t in store.tables() if t not in INTERNAL]
        if table is not None:
            if table not in tables:
                raise UserError(f"--table: '{table}' is not in {run_dir} (has: {', '.join(tables) or 'none'})")
            tables = [table]
        if not tables:
            raise UserError(f"{run_dir}: the run has no records to export")
        written = []
        for name in tables:
            target = out if len(tables) == 1 else out.with_name(f"{out.stem}.{name}{out.suffix or '.' + fmt}")
            target.parent.mkdir(parents=True, exist_ok=True)
            cols = {c for (c,) in store.con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [name]).fetchall()}
            if "provenance_id" in cols:
                query = (f'SELECT r.*, p.record AS provenance FROM "{name}" r '
                         "LEFT JOIN provenance p ON p.id = r.provenance_id ORDER BY r.key")
            else:
                query = f'SELECT * FROM "{name}"'
            options = {"parquet": "FORMAT parquet", "csv": "FORMAT csv, HEADER", "jsonl": "FORMAT json"}[fmt]
            store.con.execute(f"COPY ({query}) TO '{target}' ({options})")
            written.append((name, target, store.count(name)))
        return written
    finally:
        store.close()
