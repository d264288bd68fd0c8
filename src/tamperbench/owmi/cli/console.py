"""The stdout console of the ``owmi`` commands.

rich fits tables and wraps text to the console width, and a console writing to a pipe or a file
has no terminal to measure, so rich assumes 80 columns: ``owmi run > log`` cut the per-condition
table's columns and wrapped long lines. Written to a non-terminal, the console is ``PIPE_WIDTH``
wide instead, so a table keeps every column whole (a terminal keeps its own width).
"""

from __future__ import annotations

from rich.console import Console

PIPE_WIDTH = 320


def stdout_console() -> Console:
    con = Console()
    return con if con.is_terminal else Console(width=PIPE_WIDTH)
