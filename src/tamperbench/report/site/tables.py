"""Leaderboard tables as data: one object renders to HTML (via the templates), Markdown, CSV and LaTeX.

Why one object: the site, the downloadable exports and the tests must show the same numbers, so a
table is built once from the records and every format is a view of it. Each cell keeps a sort value
beside its display text, so the page sorts intervals by their point estimate and blanks last.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any

from tamperbench.safeio.csv_cells import csv_cell


@dataclass(frozen=True)
class Cell:
    text: str
    sort: float | str | None = None  # None sorts last

    @property
    def sort_attr(self) -> str:
        if self.sort is None or (isinstance(self.sort, float) and math.isnan(self.sort)):
            return ""
        return repr(self.sort) if isinstance(self.sort, float) else str(self.sort)

    @property
    def numeric(self) -> bool:
        return isinstance(self.sort, (int, float))


def cell(value: Any, fmt: str = "{}", sort: Any = "auto") -> Cell:
    """A cell from a raw value; None shows as an empty cell that sorts last."""
    if value is None:
        return Cell("", None)
    text = fmt.format(value)
    if sort == "auto":
        sort = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else text
    return Cell(text, sort)


def estimate_cell(est: dict | None, digits: int = 2, signed: bool = True) -> Cell:
    """``mean [lo, hi]`` from an estimate dict (keys mean, lo, hi); sorts by the mean."""
    if not est or est.get("mean") is None:
        return Cell("", None)
    sign = "+" if signed else ""
    f = f"{{:{sign}.{digits}f}}"
    text = f.format(est["mean"])
    if est.get("lo") is not None and est.get("hi") is not None:
        text += f" [{f.format(est['lo'])}, {f.format(est['hi'])}]"
    return Cell(text, float(est["mean"]))


@dataclass
class LeaderTable:
    """A titled table; ``slug`` names its export files (``<slug>.md``, ``.csv``, ``.tex``)."""

    slug: str
    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    note: str = ""
    exports: dict = field(default_factory=dict)  # {"md"|"csv"|"tex": relative path}, set by the writer

    def add(self, *cells: Cell | Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"table {self.slug}: row has {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([c if isinstance(c, Cell) else cell(c) for c in cells])

    def to_markdown(self) -> str:
        head = "| " + " | ".join(escape_cell(c) for c in self.columns) + " |"
        sep = "|" + "|".join("---" for _ in self.columns) + "|"
        body = ["| " + " | ".join(escape_cell(c.text) for c in row) + " |" for row in self.rows]
        lines = [f"### {escape_cell(self.title)}", "", head, sep, *body]
        if self.note:
            lines += ["", escape_cell(self.note)]
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf)  # RFC 4180 line ends: a cell holding a lone CR is quoted too
        w.writerow(self.columns)
        for row in self.rows:
            w.writerow([csv_cell(c.text) for c in row])
        return buf.getvalue()

    def to_latex(self) -> str:
        spec = "l" * len(self.columns)
        lines = [f"% {_latex(self.title)}", f"\\begin{{tabular}}{{{spec}}}", "\\hline",
                 " & ".join(_latex(c) for c in self.columns) + r" \\", "\\hline"]
        lines += [" & ".join(_latex(c.text) for c in row) + r" \\" for row in self.rows]
        lines += ["\\hline", "\\end{tabular}"]
        return "\n".join(lines) + "\n"


def escape_cell(text: str) -> str:
    """Markdown-safe table cell: pipes escaped, HTML metacharacters entity-encoded, one line.

    A Markdown viewer that renders inline HTML must not run model text, so ``<`` and ``&`` become
    entities rather than being left to the viewer.
    """
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = out.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    return " ".join(out.split())


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
          "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _latex(text: str) -> str:
    return "".join(_LATEX.get(ch, ch) for ch in text)


