"""Each run counted once: the same run directory given twice (or through a link), or two directories
holding the same records (a copy), must not double ``n`` and narrow every interval.

WHY by record key: every record's ``key`` is the hash of its trial spec, so two runs that hold a key
in the same table hold the same trial. The same directory is recognised by its resolved path; a copy
by shared keys.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from tamperbench.errors import UserError



def record_keys(run_dir: Path, tables: Collection[str] | None = None) -> set[tuple[str, str]]:
    """(table, key) of every record of a run (of ``tables`` only, when given), read-only; empty when it is
    not a readable run."""
    from tamperbench.store.run_store import INTERNAL_TABLES, RunStore

    try:
        store = RunStore.open_existing(run_dir, read_only=True)
    except UserError:
        return set()  # not a run: the caller reports it in its own words
    try:
        out: set[tuple[str, str]] = set()
        for table in store.tables():
            if table not in INTERNAL_TABLES and (tables is None or table in tables) and "key" in store.column_types(table):
                out |= {(table, k) for k in store.keys(table)}
        return out
    finally:
        store.close()


def distinct_paths(paths: Sequence[Path]) -> tuple[list[Path], list[str]]:
    """(paths to count, one line per path left out): a path resolving to a run already given is left out."""
    kept: list[Path] = []
    notes: list[str] = []
    by_path: dict[Path, Path] = {}
    for p in map(Path, paths):
        real = p.resolve()
        if real in by_path:
            notes.append(f"{p}: the same run as {by_path[real]} (given twice); counted once")
            continue
        by_path[real] = p
        kept.append(p)
    return kept, notes


def _shared(mine: set[tuple[str, str]], theirs: set[tuple[str, str]]) -> int:
    """Records two runs share when every table both hold shares at least one key (0 otherwise). WHY every
    table: a run can hold records computed from settings another run shares (OWMI's impact-matching
    calibration is the same for every read-out of one spec) beside trials of its own; a shared table of that
    kind alone does not make the second run a copy of the first, shared trials do (a copy taken mid-run
    shares some of each table)."""
    common = {t for t, _ in mine} & {t for t, _ in theirs}
    both = mine & theirs
    return len(both) if common and common <= {t for t, _ in both} else 0


def distinct_records(paths: Sequence[Path], tables: Collection[str] | None = None) -> tuple[list[Path], list[str]]:
    """(runs to count, one line per run left out): a run sharing records with an earlier one (a copy: see
    ``_shared``). ``tables``: the tables whose records the caller counts (every table with keys when None)."""
    kept: list[Path] = []
    notes: list[str] = []
    keys: list[tuple[Path, set[tuple[str, str]]]] = []
    for p in map(Path, paths):
        mine = record_keys(p, tables)
        twin = next(((q, n) for q, theirs in keys if (n := _shared(mine, theirs))), None)
        if twin is not None:
            notes.append(f"{p}: holds {twin[1]} record(s) with the same keys as {twin[0]} (a copy of the same "
                         "trials); left out, so each trial is counted once")
            continue
        keys.append((p, mine))
        kept.append(p)
    return kept, notes


def distinct_runs(paths: Sequence[Path], tables: Collection[str] | None = None) -> tuple[list[Path], list[str]]:
    """Both: each directory once, and each set of records (of ``tables``, when given) once."""
    kept, notes = distinct_paths(paths)
    kept, more = distinct_records(kept, tables)
    return kept, notes + more
