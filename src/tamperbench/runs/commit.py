"""The commit loop: the driver process writes finished units to the run store, batch by batch.

WHY one writer: DuckDB allows one writing process per file, and a batch written in one go per
table means an interrupted run loses at most the batch in flight; stored keys are skipped on the
next plan, and ``INSERT OR IGNORE`` makes a replayed batch harmless.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel

from tamperbench.runs.units import Finished


@dataclass
class CommitReport:
    units: int = 0
    written: Counter = field(default_factory=Counter)  # rows added per table
    stats: Counter = field(default_factory=Counter)  # summed Finished.stats


def commit(store, batches: Iterable[list[Finished]],
           on_batch: Callable[[list[Finished], CommitReport], None] | None = None) -> CommitReport:
    """Write every finished batch (one ``store.write`` per table per batch); returns the totals."""
    report = CommitReport()
    for batch in batches:
        by_table: dict[str, list[BaseModel]] = {}
        for done in batch:
            for table, recs in done.records.items():
                by_table.setdefault(table, []).extend(recs)
            report.stats.update({k: v for k, v in done.stats.items() if isinstance(v, (int, float))})
        for table, recs in by_table.items():
            report.written[table] += store.write(table, recs)
        report.units += len(batch)
        if on_batch is not None:
            on_batch(batch, report)
    return report
