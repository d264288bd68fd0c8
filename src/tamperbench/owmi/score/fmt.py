"""Formatting helpers shared by every ``owmi score`` output module (``render``, ``decay``,
``reconstruction``, ``site``): numbers, intervals, margins, cell labels and inert Markdown.

A leaf module: it imports nothing from the analysis package, so the output modules import it and
never each other's private names.
"""

from __future__ import annotations

import math

from tamperbench.safeio.markdown import escape_markdown


def esc(x) -> str:
    """Untrusted text (model names, labels, site names) as inert one-line Markdown: ``tamperbench.safeio.markdown``
    escapes ``& < >`` as entities as well as ``|`` and Markdown punctuation, because owmi_score.md is
    opened in viewers that render HTML inside Markdown (a name ``<img onerror=...>`` must not act)."""
    return escape_markdown(x)


def num(x, nd=4) -> str:
    """A number with ``nd`` decimals; ``n/a`` for None, NaN or infinity."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def ci(interval, nd=4) -> str:
    """``[lo, hi]``; ``n/a`` when missing or not finite."""
    if not interval or any(v is None or not math.isfinite(v) for v in interval):
        return "n/a"
    return f"[{interval[0]:.{nd}f}, {interval[1]:.{nd}f}]"


def cell_label(c: dict) -> str:
    """One cell as a readable label (the identity fields are shown separately); a read-out other than
    ``generated`` is named in it (a verbal and a token-level read-out are different cells)."""
    readout = c.get("readout") or "generated"
    return (f"{c['benchmark']} · {c['site']} · {c['operator']}@{c['dose']:g} · {c['probe_family']} · "
            f"track {c['track']} · {c['hook_scope']}" + ("" if readout == "generated" else f" · {READOUT_TAGS[readout]}"))


READOUT_TAGS = {"generated": "generated read-out", "constrained": "grammar-constrained read-out",
                "choice": "choice read-out (token-level)"}
READOUTS = {
    "generated": "the probe's JSON answer decoded greedily and parsed afterwards (a verbal report; the paper's read-out); "
                 "an unparsed answer is an outcome, never imputed",
    "constrained": "the probe's JSON answer decoded greedily under a grammar built from the probe's JSON schema (a "
                   "verbal report whose format is enforced: its parse rate measures content, not format)",
    "choice": "a token-level read-out, not a verbal report (C.7): the answer's JSON prefix is teacher-forced and each "
              "option of the probe's closed set scored by its log-probability; detection's score is g = P(yes) / "
              "(P(yes) + P(no)); nothing is decoded, so the parse rate counts only rows whose options carry too little "
              "probability after the forced prefix (choice.MIN_OPTION_MASS) to be scored",
}


def readout_parse_note(readout: str | None) -> str:
    """What a parse rate means under a read-out: empty for a decoded one."""
    return " (token-level read-out: unparsed = too little option mass)" if readout == "choice" else ""


NO_PARSED = "no parsed pairs"


def margin(m: dict | None) -> str:
    """A control margin ``+est [lo, hi] (n=pairs)``; ``n/a`` when absent; ``no parsed pairs`` when every
    pair it averages is unparsed rows coded 0 (D.4 inclusive coding): that is no measurement, not a 0."""
    if not m:
        return "n/a"
    if m.get("parsed_pairs") == 0:
        return NO_PARSED + f" ({m['pairs']} unparsed pairs coded 0)"
    return f"{m['estimate']:+.4f} {ci(m['ci'])} (n={m['pairs']})"


def parse_line(rates: list[dict]) -> str:
    """Parse rates as ``label parsed/attempted``, one per condition and observer tier
    (``observers.tier_parse_rates``); entries without a label (older results) by condition."""
    return "; ".join(f"{p.get('label') or p['condition']} {p['parsed']}/{p['attempted']}" for p in rates)


def drop_empty_sections(lines: list[str]) -> list[str]:
    """Markdown lines without the sections (``##``/``###`` headings) that hold nothing but blank lines and
    empty tables (a header row and its separator, no data row): an empty section prints no header."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith(("## ", "### ")):
            level = len(lines[i]) - len(lines[i].lstrip("#"))
            j = i + 1
            while j < len(lines) and not (lines[j].startswith("#") and len(lines[j]) - len(lines[j].lstrip("#")) <= level):
                j += 1
            body = [b for b in lines[i + 1:j] if b.strip()]
            scaffold = [b.startswith("|---") or (b.startswith("|") and k + 1 < len(body) and body[k + 1].startswith("|---"))
                        for k, b in enumerate(body)]
            if all(scaffold):
                i = j
                continue
        out.append(lines[i])
        i += 1
    while out and not out[-1].strip():
        out.pop()
    return out
