"""Score a JSONL of responses collected outside tamperbench (any model, any API).

Why line-by-line with a problem list instead of failing fast: people collect responses from
several providers and one bad line (a truncated write, a typo in an id) should not hide the
verdicts of the other several hundred. Each problem names its line so it can be fixed.

Two things are file-level instead, one ``error:`` line and exit 2: a file that is not UTF-8 text
(binary data, or a Latin-1 export: every line would need the same fix) and one that cannot be read.

Bounded work: a response longer than :data:`MAX_RESPONSE_CHARS` characters, or a line longer than
:data:`MAX_LINE_CHARS` characters (checked before JSON parsing), is reported and skipped like any bad
line. Scoring time grows linearly with a response's length (see quote/evidence.py and
benchmarks/quote_score_scaling.py), so the cap bounds one line's cost to a few seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tamperbench.errors import UserError
from tamperbench.safeio.files import check_size
from tamperbench.quote.items import items_by_id
from tamperbench.quote.scorer import score_response

MAX_RESPONSE_CHARS = 4_000_000
MAX_LINE_CHARS = 6 * MAX_RESPONSE_CHARS  # JSON may spell one character as a 6-character \uXXXX escape


MAX_RESPONSES_BYTES = 256 << 20  # ~ a million answers of a few hundred characters; more is not a responses file


def read_lines(path: Path) -> list[str]:
    """The file's lines as text; raises a one-line :class:`UserError` when it is not UTF-8 text.

    Splits bytes on ``\\n`` only, so U+2028 inside a JSON string (legal, unescaped) stays one line.
    """
    check_size(path, MAX_RESPONSES_BYTES, "responses file")
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a JSONL file") from None
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read ({err.strerror or err})") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # a UTF-8 byte-order mark (some editors add one)
    if b"\0" in data:
        n = data.count(b"\n", 0, data.index(b"\0")) + 1
        raise UserError(f"{path}: line {n} holds NUL bytes: binary data, not a UTF-8 JSONL file")
    out = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        try:
            out.append(raw.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError as err:
            raise UserError(f"{path}: line {n} is not UTF-8 text (byte 0x{raw[err.start]:02x} at column "
                            f"{err.start + 1}); save the file as UTF-8") from None
    return out


def score_lines(lines: Iterable[str]) -> tuple[list[dict], list[tuple[int, str]], int]:
    """(verdicts, problems as (1-based line, message), number of skipped lines)."""
    known = items_by_id()
    verdicts: list[dict] = []
    problems: list[tuple[int, str]] = []
    skipped = 0
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            problems.append((n, f"line longer than {MAX_LINE_CHARS:,} characters; line skipped"))
            skipped += 1
            continue
        try:
            obj = json.loads(line)
        except ValueError as err:
            msg = f"{err.msg} at column {err.colno}" if isinstance(err, json.JSONDecodeError) else str(err)
            problems.append((n, f"malformed JSON ({msg}); line skipped"))
            skipped += 1
            continue
        except RecursionError:
            problems.append((n, "JSON nested too deeply; line skipped"))
            skipped += 1
            continue
        if not isinstance(obj, dict):
            problems.append((n, "not a JSON object; line skipped"))
            skipped += 1
            continue
        item_id, response = obj.get("item_id"), obj.get("response")
        if not isinstance(item_id, str):
            problems.append((n, "missing or non-string 'item_id'; line skipped"))
            skipped += 1
            continue
        if item_id not in known:
            problems.append((n, f"unknown item id {item_id[:80]!r}; line skipped"))
            skipped += 1
            continue
        if response is None or not isinstance(response, str):
            problems.append((n, "missing or non-string 'response'; line skipped"))
            skipped += 1
            continue
        if len(response) > MAX_RESPONSE_CHARS:
            problems.append((n, f"response of {len(response):,} characters is longer than the "
                                f"{MAX_RESPONSE_CHARS:,} limit; line skipped"))
            skipped += 1
            continue
        bad = next((f for f in ("response", "model", "arm", "repeat") if f in obj and not _encodable(obj[f])), None)
        if bad is not None:
            problems.append((n, f"'{bad}' holds an unpaired surrogate escape (\\udXXX), not text; line skipped"))
            skipped += 1
            continue
        if not response.strip():
            problems.append((n, f"empty response for {item_id}; scored as no_answer"))
        v = score_response(known[item_id], response)
        row = {"item_id": item_id, "category": v.category, "sub_label": v.sub_label,
               "answer": v.answer, "evidence": v.evidence, "line": n}
        for extra in ("model", "arm", "repeat"):
            if extra in obj:
                row[extra] = obj[extra]
        verdicts.append(row)
    return verdicts, problems, skipped


def _encodable(value: object) -> bool:
    """False for JSON text carrying a lone ``\\ud800``-style escape: it cannot be written as UTF-8."""
    try:
        (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
