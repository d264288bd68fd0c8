"""Untrusted text (model replies, model names, spec strings) in Markdown files, and back to HTML.

WHY: ``report.md`` and ``tables.md`` are opened in viewers that render HTML inside Markdown (GitHub,
VS Code, Jupyter). A reply carrying ``<img src=x onerror=...>``, a ``[link](javascript:...)`` or a
``|`` that breaks a table must show as the characters it is, not act. :func:`escape_markdown`
makes any text inert: ``& < >`` become entities and Markdown punctuation is backslash-escaped, on
one line. :func:`inline_to_html` is the reverse for the report's own small renderer: it honours
those escapes plus ``**bold**`` and `` `code` `` written by tamperbench, and HTML-escapes the rest.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

# Inline syntax, table pipes, HTML. "]" only before "(" or "[": a link needs "](" or "][", so CI brackets
# such as "[0.05, 0.20]" stay readable; "[" at the start is escaped below (reference definitions).
_SPECIAL = re.compile(r"([\\`*_|~<>&]|\](?=[(\[]))")
_LINE_START = re.compile(r"^(\s*)(\d+[.)]|[#+=-]|\[)((?<=\[)|(?=\s|$))")  # headings, lists, definitions
_TOKEN = re.compile(r"\\([\\`*_{}\[\]()#+=\-.!|~<>&])|&(lt|gt|amp|quot|#\d{1,7});|\*\*(.+?)\*\*|`([^`]+)`")


def escape_markdown(text: object) -> str:
    """``text`` as inert one-line Markdown: entities for ``& < >``, a backslash before punctuation."""
    flat = " ".join(str(text).splitlines())

    def one(m: re.Match) -> str:
        ch = m.group(1)
        return {"&": "&amp;", "<": "&lt;", ">": "&gt;"}.get(ch, "\\" + ch)

    def start(m: re.Match) -> str:
        return f"{m.group(1)}{m.group(2)[:-1]}\\{m.group(2)[-1]}"

    return _LINE_START.sub(start, _SPECIAL.sub(one, flat), count=1)


def escape_markdown_cell(text: object) -> str:
    """A table cell: :func:`escape_markdown` (which also escapes ``|``, so the row keeps its columns)."""
    return escape_markdown(text)


def inline_to_html(text: str) -> str:
    """Markdown inline text (escapes, entities, **bold**, `code`) as safe HTML: no tag survives from input."""
    out, pos = [], 0
    for m in _TOKEN.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        escaped, entity, bold, code = m.groups()
        if escaped is not None:
            out.append(html.escape(escaped))
        elif entity is not None:
            out.append(html.escape(html.unescape(f"&{entity};")))
        elif bold is not None:
            out.append(f"<b>{inline_to_html(bold)}</b>")
        else:
            out.append(f"<code>{html.escape(code)}</code>")
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def markdown_table(head: list[str], rows: Sequence[Sequence[object]], title: str | None = None, level: int = 3) -> str:
    """The one Markdown table writer every suite uses: an optional heading, a header row, and body
    cells made inert by :func:`escape_markdown_cell` (model names and replies are untrusted)."""
    lines = [f"{'#' * level} {title}", ""] if title else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(escape_markdown_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)
