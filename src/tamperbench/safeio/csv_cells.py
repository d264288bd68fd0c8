"""Spreadsheet-safe CSV cells: the one rule both ``export --format csv`` and the report site's table
downloads use.

WHY: a CSV opened in a spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a
formula (``=HYPERLINK(...)``, ``+cmd|' /C calc'!A0``), and model responses start with those often. By
OWASP's rule (CSV injection) such a cell, and one starting with a tab or a carriage return, gets a
leading apostrophe, which spreadsheets show as text. A cell made of numbers only (``-0.25``, ``+3e-4``,
``-12%``, an estimate ``+0.50 [+0.25, +0.75]``) is left alone: with no letter in it, it can call no
function and reach no link or program, and an apostrophe would turn a number into text. ``-inf =cmd``
or ``+1 +cmd|...`` are not numbers only, so they are defused.
``tamperbench export --format csv --raw`` writes the bytes untouched for readers that are not
spreadsheets.
"""

from __future__ import annotations

import re

import pyarrow as pa

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUM = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?"
_NUMBERS_ONLY = re.compile(rf"{_NUM}(?:[ ,\[\]()]+{_NUM})*[ \])]*")  # separators required: no backtracking blow-up


def csv_cell(text: str) -> str:
    """``text`` with a leading apostrophe when a spreadsheet would read it as a formula."""
    return "'" + text if text[:1] in FORMULA_START and not _NUMBERS_ONLY.fullmatch(text) else text


def _is_text(t: pa.DataType) -> bool:
    t = t.storage_type if isinstance(t, pa.ExtensionType) else t
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def defuse_table(table: pa.Table) -> pa.Table:
    """Every text column of ``table`` through :func:`csv_cell` (nulls kept)."""
    for i, field in enumerate(table.schema):
        if _is_text(field.type):
            col = table.column(i)
            values = [None if v is None else csv_cell(v) for v in col.to_pylist()]
            table = table.set_column(i, pa.field(field.name, pa.string()), pa.array(values, pa.string()))
    return table
