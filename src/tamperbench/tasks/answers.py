"""Read the answers file of ``tamperbench bench score``: JSON lines ``{item_id, response}``, each one bounded.

Bounded work and memory: the file is read line by line with a length limit, so a line longer than
:data:`MAX_LINE_BYTES` is skipped (and counted) without ever being held whole; a response longer than
:data:`MAX_RESPONSE_CHARS` is skipped too. WHY these sizes: GSM8K's scorer (token F1) takes about 4.5 s per
million characters here, so one line costs at most a few seconds; a million characters is more than any
model's output window. JSON may spell one character as a 6-character ``\\uXXXX`` escape, hence 6x for the line.

A line nested too deeply for the JSON parser is skipped and counted like any bad line (``quote score`` does
the same), instead of aborting the whole file. File-level faults (missing, a folder, too large, not UTF-8
text) are one :class:`UserError` line, exit 2, before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tamperbench.errors import UserError

MAX_RESPONSE_CHARS = 1_000_000
MAX_LINE_BYTES = 6 * MAX_RESPONSE_CHARS + 65_536
MAX_FILE_BYTES = 1 << 30  # verdicts are collected before writing: bound what one file can ask of memory


def read_answer_lines(path: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(numbered lines as text, problems) for the lines that fit; an over-long line is a problem, not a line."""
    if not path.exists():
        raise UserError(f"--answers: {path}: no such file")
    if not path.is_file():
        raise UserError(f"--answers: {path}: not a regular file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UserError(f"--answers: {path}: {size:,} bytes, larger than the {MAX_FILE_BYTES:,}-byte limit; split it")
    lines: list[tuple[int, str]] = []
    problems: list[tuple[int, str]] = []
    with path.open("rb") as f:
        line_no = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            line_no += 1
            if len(raw) > MAX_LINE_BYTES:
                while raw and not raw.endswith(b"\n"):  # skip the rest of the line without holding it
                    raw = f.readline(1 << 20)
                problems.append((line_no, f"line longer than {MAX_LINE_BYTES:,} bytes; line skipped"))
                continue
            if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte-order mark (some editors add one)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise UserError(f"--answers: {path}: line {line_no} is not UTF-8 text (byte 0x{raw[err.start]:02x} "
                                f"at column {err.start + 1}); save the file as UTF-8") from None
            lines.append((line_no, text))
    return lines, problems


def parse_answers(lines: list[tuple[int, str]], by_id: dict[str, Any], name: str) -> tuple[list[tuple[int, Any, str]],
                                                                                       list[tuple[int, str]]]:
    """(line number, item, response) for each good line, and (line number, message) for each bad one."""
    good, problems = [], []
    for line_no, line in lines:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append((line_no, f"not valid JSON ({err.msg})"))
            continue
        except RecursionError:
            problems.append((line_no, "JSON nested too deeply; line skipped"))
            continue
        if not isinstance(row, dict):
            problems.append((line_no, "expected a JSON object {item_id, response}"))
            continue
        missing = [k for k in ("item_id", "response") if k not in row]
        if missing:
            problems.append((line_no, f"missing field {missing[0]!r}"))
            continue
        item_id, response = row["item_id"], row["response"]
        if not isinstance(response, str):
            problems.append((line_no, f"field 'response' must be a string, got {type(response).__name__}"))
            continue
        if len(response) > MAX_RESPONSE_CHARS:
            problems.append((line_no, f"response of {len(response):,} characters is longer than the "
                                      f"{MAX_RESPONSE_CHARS:,} limit; line skipped"))
            continue
        try:
            response.encode("utf-8")
        except UnicodeEncodeError:
            problems.append((line_no, "field 'response' holds an unpaired surrogate escape (\\udXXX), not text; "
                                      "line skipped"))
            continue
        if not isinstance(item_id, (str, int)) or isinstance(item_id, bool):
            problems.append((line_no, f"field 'item_id' must be a string, got {type(item_id).__name__}"))
            continue
        item = by_id.get(str(item_id)) or by_id.get(f"{name}/{item_id}")
        if item is None:
            problems.append((line_no, f"unknown item_id {str(item_id)[:80]!r}"))
            continue
        good.append((line_no, item, response))
    return good, problems
