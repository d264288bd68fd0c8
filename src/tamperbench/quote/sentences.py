"""The sentence-boundary convention every quote item is defined against.

The source benchmark found that models disagree about where sentences start and end (colons,
section labels, neighbour sentences). An item is only fair if *our* notion of "the sentence" is
written down and checkable, so this module is that written-down convention:

Prose documents (``mode="prose"``)
  1. A sentence never crosses a line break. Each paragraph, heading, header field or sign-off
     is written on one line of the document file.
  2. A section label at the start of a line is not part of any sentence: ``4.3``, ``4.``,
     ``#``/``##``, ``-``/``*``/``•`` followed by whitespace.
  3. Inside a line, a sentence ends after ``.``, ``!`` or ``?`` (plus any closing quotes or
     brackets right after it) when whitespace or the end of the line follows. A period inside
     a token (``3.2.0``, ``tidepool.read``, ``1.8``) therefore never ends a sentence. The
     documents contain no abbreviations with a period followed by a space.
  4. Colons, semicolons, dashes and conjunctions never end a sentence.
  5. Leading and trailing whitespace is not part of a sentence.

Code documents (``mode="lines"``): every non-blank line is one unit, stripped of leading and
trailing whitespace (a diff's ``+``/``-`` marker stays, it is part of the line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tamperbench.errors import UserError

LABEL_RE = re.compile(r"^(?:#{1,6}|[-*•]|\d+(?:\.\d+)+|\d+\.)[ \t]+")
END_RE = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)")
TERMINAL_RE = re.compile(r"[.!?][\"'”’)\]]*$")


@dataclass(frozen=True)
class Segment:
    """One sentence (prose) or line (code) with where it sits in the document."""

    text: str
    start: int  # character offset in the document
    end: int
    line: int  # 0-based line number in the document
    index_in_line: int  # 0-based sentence number within its line
    label: str | None  # section label of the line it sits on, e.g. "4.3"

    @property
    def is_terminal(self) -> bool:
        """True when the unit ends like a sentence (., !, ?), unlike a heading or sign-off."""
        return bool(TERMINAL_RE.search(self.text))


def segment(document: str, mode: str = "prose") -> list[Segment]:
    """Split a document into the units an instruction may point at."""
    if mode not in ("prose", "lines"):
        raise UserError(f"segmentation mode must be 'prose' or 'lines', got {mode!r}")
    out: list[Segment] = []
    offset = 0
    for line_no, raw_line in enumerate(document.split("\n")):
        line_start = offset
        offset += len(raw_line) + 1
        if not raw_line.strip():
            continue
        if mode == "lines":
            lead = len(raw_line) - len(raw_line.lstrip())
            text = raw_line.strip()
            out.append(Segment(text, line_start + lead, line_start + lead + len(text), line_no, 0, None))
            continue
        label = None
        body_start = 0
        m = LABEL_RE.match(raw_line)
        if m:
            label = m.group(0).strip().rstrip(".") or m.group(0).strip()
            body_start = m.end()
        pos = body_start
        idx = 0
        for end_match in END_RE.finditer(raw_line, body_start):
            piece = raw_line[pos : end_match.end()]
            if piece.strip():
                out.append(_make(piece, line_start + pos, line_no, idx, label))
                idx += 1
            pos = end_match.end()
        rest = raw_line[pos:]
        if rest.strip():
            out.append(_make(rest, line_start + pos, line_no, idx, label))
    return out


def _make(piece: str, abs_start: int, line_no: int, idx: int, label: str | None) -> Segment:
    lead = len(piece) - len(piece.lstrip())
    text = piece.strip()
    start = abs_start + lead
    return Segment(text, start, start + len(text), line_no, idx, label)


def locate(segments: list[Segment], locator: dict) -> list[Segment]:
    """Every segment an item's locator matches; a well-formed item matches exactly one.

    Locator kinds (the machine-checkable twin of the human instruction):
      ``{"kind": "keywords", "keywords": [...]}`` units containing all keywords (case-insensitive);
      ``{"kind": "last"}`` the last unit that ends like a sentence (skips sign-offs);
      ``{"kind": "section", "label": "4.3", "index": 2}`` the index-th (1-based) sentence
      of the line labelled ``label``.
    """
    kind = locator.get("kind")
    if kind == "keywords":
        words = [w.casefold() for w in locator["keywords"]]
        return [s for s in segments if all(w in s.text.casefold() for w in words)]
    if kind == "last":
        terminal = [s for s in segments if s.is_terminal]
        return terminal[-1:]
    if kind == "section":
        return [s for s in segments if s.label == locator["label"] and s.index_in_line == locator["index"] - 1]
    raise UserError(f"unknown locator kind {kind!r}")
