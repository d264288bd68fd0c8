"""What a suite hands the site builder: runs in, a section (tables, plots, pages) out.

Why a small contract: the builder knows nothing about any suite. A suite's report section (found
through the suite registry) receives its runs and the writer, computes its tables from the records at
build time, writes its plots and viewer pages, and returns a :class:`Section` for the index page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tamperbench.report.site.tables import LeaderTable


@dataclass
class RunInfo:
    """A readable run directory, numbered for its provenance page (``runs/run-<index>.html``)."""

    path: Path
    index: int
    suite: str
    spec: dict
    schema_version: int
    provenance: list[dict] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    sessions: list[dict] = field(default_factory=list)  # runs.session: what each process computed with

    @property
    def page(self) -> str:
        return f"runs/run-{self.index}.html"

    @property
    def label(self) -> str:
        models = sorted({p.get("source", "?") for p in self.provenance}) or [str(self.spec.get("model", "?"))]
        return f"{', '.join(models)} ({self.path.name})"


@dataclass
class Plot:
    title: str
    files: dict  # {"svg": rel, "png": rel}
    caption: str = ""


@dataclass
class Section:
    suite: str
    title: str
    tables: list[LeaderTable] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    pages: list[dict] = field(default_factory=list)  # {"title", "href", "note"}
    notes: list[str] = field(default_factory=list)
    runs: list[RunInfo] = field(default_factory=list)
