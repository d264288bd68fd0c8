"""Read a judge's verdict out of free model text.

WHY so lenient and so careful at once: judges wrap JSON in code fences, add prose before or after,
use Python-style single quotes or ``True``/``False``, and small models sometimes echo the reply
they were judging (which may itself contain a fake verdict). We take the FIRST complete ``{...}``
object that (a) parses under one of a few repairs and (b) carries at least one label, and we skip
any object whose text occurs verbatim in the reply being judged, because that object was written
by the judged model, not by the judge.

A label that is missing or not a boolean is ``None`` (an abstention), never ``False``: an unreadable
vote must not look like "the reply did not flag".
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from tamperbench.judge.prompt import LABELS
from tamperbench.labels import PARSE_RULES, ParseRule

ParseStatus = Literal["parsed", "partial", "unparsed"]
_TRUE_WORDS = {"true", "yes", "y", "1"}
_FALSE_WORDS = {"false", "no", "n", "0"}


def clean_text(text: str | None) -> str | None:
    """``text`` with every lone UTF-16 surrogate (a JSON ``"\\ud800"`` escape, a served judge's reply) made
    U+FFFD, so it can be stored and printed; valid surrogate pairs are joined. None stays None."""
    if text is None:
        return None
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@dataclass(frozen=True)
class ParsedVerdict:
    status: ParseStatus
    labels: dict[str, bool | None] = field(default_factory=lambda: {k: None for k in LABELS})
    confidence: float | None = None
    rationale: str | None = None
    error: str | None = None  # why nothing (or not everything) was read

    @property
    def n_labels(self) -> int:
        return sum(v is not None for v in self.labels.values())


def balanced_objects(text: str) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of top-level ``{...}`` objects, scanning strings in ' or " quotes.

    A ``{`` that never closes is skipped and scanning restarts one character later, so text like
    ``"{ oops {"a": 1}"`` still yields the inner object.
    """
    spans: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] != "{":
            i += 1
            continue
        end = _match_brace(text, i)
        if end is None:
            i += 1
            continue
        spans.append((i, end))
        i = end
    return spans


def _match_brace(text: str, start: int) -> int | None:
    depth, i, quote = 0, start, None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
            elif ch == "\n" and quote == "'":
                return None  # an apostrophe in prose, not a string: give up on this start
        elif ch in "\"'":
            # an apostrophe between letters (don't) is prose, not a string opener
            if ch == "'" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
                pass
            else:
                quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _to_json(span: str) -> str:
    """Rewrite Python-ish object text to JSON: quoted strings re-encoded, True/False/None, trailing commas."""
    out: list[str] = []
    i, n = 0, len(span)
    while i < n:
        ch = span[i]
        if ch in "\"'":
            j, buf = i + 1, []
            while j < n and span[j] != ch:
                if span[j] == "\\" and j + 1 < n:
                    nxt = span[j + 1]
                    buf.append(nxt if nxt in "\"'\\" else span[j : j + 2])
                    j += 2
                    continue
                buf.append(span[j])
                j += 1
            raw = "".join(buf)
            try:
                decoded = json.loads('"' + raw.replace('"', '\\"') + '"')
            except json.JSONDecodeError:
                decoded = raw
            out.append(json.dumps(decoded))
            i = j + 1
            continue
        if span.startswith("True", i):
            out.append("true")
            i += 4
            continue
        if span.startswith("False", i):
            out.append("false")
            i += 5
            continue
        if span.startswith("None", i):
            out.append("null")
            i += 4
            continue
        if ch == ",":
            k = i + 1
            while k < n and span[k].isspace():
                k += 1
            if k < n and span[k] in "}]":
                i += 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _load_object(span: str) -> dict | None:
    for attempt in (lambda s: json.loads(s), lambda s: json.loads(_to_json(s)), ast.literal_eval):
        try:
            obj = attempt(span)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(obj, dict):
            return obj
    return None


def coerce_bool(value: object) -> bool | None:
    """true/false, "true"/"yes"/"no", 0/1 -> bool; anything else (0.5, "maybe", null) -> None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    return None


def _coerce_confidence(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past float's range (400 digits)
        return None
    return number if math.isfinite(number) and 0.0 <= number <= 1.0 else None


def parse_verdict(text: str, *, reply: str | None = None) -> ParsedVerdict:
    """The judge's verdict in ``text``; ``reply`` (the judged text) lets us skip echoed objects.

    No text can raise: whatever escapes the repairs below makes the vote unparsed, as the reference
    turns any exception into an unparsed vote (a judging batch never aborts on one reply).
    """
    try:
        return _parse_robust(text, reply)
    except Exception as exc:  # noqa: BLE001 - any failure is an unparsed vote, never a crashed batch
        return ParsedVerdict(status="unparsed", error=clean_text(f"robust parse: {type(exc).__name__}: {_short(exc)}"[:300]))


def _parse_robust(text: str, reply: str | None) -> ParsedVerdict:
    echoed = 0
    for start, end in balanced_objects(text):
        span = text[start:end]
        obj = _load_object(span)
        if obj is None:
            continue
        keys = {str(k).strip().lower(): v for k, v in obj.items()}
        if not any(label in keys for label in LABELS):
            continue
        if reply and span in reply:
            echoed += 1
            continue
        labels = {label: coerce_bool(keys.get(label)) for label in LABELS}
        rationale = keys.get("rationale")
        verdict_kw: dict[str, Any] = dict(
            labels=labels,
            confidence=_coerce_confidence(keys.get("confidence")),
            rationale=clean_text(rationale) if isinstance(rationale, str) else None,
        )
        if all(v is not None for v in labels.values()):
            return ParsedVerdict(status="parsed", **verdict_kw)
        missing = [k for k, v in labels.items() if v is None]
        return ParsedVerdict(status="partial", error=f"labels missing or not boolean: {missing}", **verdict_kw)
    error = "no JSON object with a label found"
    if echoed:
        error += f" ({echoed} object(s) skipped as echoed from the judged reply)"
    return ParsedVerdict(status="unparsed", error=error)


_GREEDY_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_reference(text: str) -> ParsedVerdict:
    """The reference implementation's verdict rule (``_extract_json`` / ``_verdict_from`` in
    ``src/awareness/judge.py`` of fractalego/Sleight-of-Word), reproduced quirks and all.

    The span from the first ``{`` to the last ``}`` goes to ``json.loads``; every label is
    ``bool(obj.get(label, False))``, so a missing key is False and the string ``"false"`` is True;
    ``confidence`` is ``float(obj.get("confidence", 0.5))`` and must lie in [0, 1] (the reference's
    pydantic bound). Any exception makes the whole vote unparsed (every label None), which the
    reference's ``panel_combine`` then counts as "no". Nothing is stripped and nothing is retried.
    What the rule imputed (missing keys, non-boolean values) is written to ``error`` for the audit.
    """
    try:
        m = _GREEDY_OBJECT.search(text)
        if m is None:
            return ParsedVerdict(status="unparsed", error="reference parse: no JSON object in judge output")
        obj = json.loads(m.group())
        labels: dict[str, bool | None] = {k: bool(obj.get(k, False)) for k in LABELS}
        confidence = float(obj.get("confidence", 0.5))
        if not 0.0 <= confidence <= 1.0:  # NaN fails too, as under the reference's Field(ge=0, le=1)
            raise ValueError(f"confidence {confidence!r} outside [0, 1]")
        rationale = clean_text(str(obj.get("rationale", "")).strip()[:500])
        missing = [k for k in LABELS if k not in obj]
        loose = [f"{k}={_short(obj[k])} read as {labels[k]}" for k in LABELS if k in obj and not isinstance(obj[k], bool)]
    except Exception as exc:  # noqa: BLE001 - the reference's ``except Exception``: any failure is an unparsed vote
        return ParsedVerdict(status="unparsed",
                             error=clean_text(f"reference parse: {type(exc).__name__}: {_short(exc)}"[:300]))
    notes = ([f"missing keys read as False: {missing}"] if missing else []) + loose
    return ParsedVerdict(status="partial" if missing else "parsed", labels=labels, confidence=confidence,
                         rationale=rationale, error=clean_text("reference parse: " + "; ".join(notes)) if notes else None)


def _short(value: object, limit: int = 120) -> str:
    """``repr`` of a value for an audit note, never raising (a 5,000-digit int has no repr) and cut short."""
    try:
        text = value if isinstance(value, BaseException) else repr(value)
        text = str(text)
    except Exception as exc:  # noqa: BLE001 - e.g. ValueError: int too large to convert to str
        text = f"<{type(value).__name__}: {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_with(rule: ParseRule, text: str, *, reply: str | None = None) -> ParsedVerdict:
    """The verdict in ``text`` under ``rule``: ``robust`` (:func:`parse_verdict`) or ``reference``."""
    if rule == "reference":
        return parse_reference(text)
    if rule != "robust":
        raise ValueError(f"parse rule must be one of {PARSE_RULES}, not {rule!r}")
    return parse_verdict(text, reply=reply)


def better(first: ParsedVerdict, second: ParsedVerdict) -> ParsedVerdict:
    """The retry wins unless it read fewer labels than the first attempt."""
    return second if second.n_labels >= first.n_labels else first
