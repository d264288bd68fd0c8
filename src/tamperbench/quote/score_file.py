"""Score a JSONL of responses collected outside tamperbench (any model, any API).

Why line-by-line with a problem list instead of failing fast: people collect responses from
several providers and one bad line (a truncated write, a typo in an id) should not hide the
verdicts of the other several hundred. Each problem names its line so it can be fixed.
"""

from __future__ import annotations

import json

from tamperbench.quote.items import items_by_id
from tamperbench.quote.scorer import score_response


def score_lines(lines: list[str]) -> tuple[list[dict], list[tuple[int, str]], int]:
    """(verdicts, problems as (1-based line, message), number of skipped lines)."""
    known = items_by_id()
    verdicts: list[dict] = []
    problems: list[tuple[int, str]] = []
    skipped = 0
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as err:
            problems.append((n, f"malformed JSON ({err.msg} at column {err.colno}); line skipped"))
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
            problems.append((n, f"unknown item id {item_id!r}; line skipped"))
            skipped += 1
            continue
        if response is None or not isinstance(response, str):
            problems.append((n, "missing or non-string 'response'; line skipped"))
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
