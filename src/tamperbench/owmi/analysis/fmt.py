"""Formatting helpers shared by every ``owmi score`` output module (``render``, ``decay``,
``reconstruction``, ``site``): numbers, intervals, margins, cell labels and inert Markdown.

A leaf module: it imports nothing from the analysis package, so the output modules import it and
never each other's private names.
"""

from __future__ import annotations

import math

from tamperbench.markdown import escape_markdown


def esc(x) -> str:
    """Untrusted text (model names, labels, site names) as inert one-line Markdown: ``tamperbench.markdown``
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
    """One cell as a readable label (the identity fields are shown separately)."""
    return (f"{c['benchmark']} · {c['site']} · {c['operator']}@{c['dose']:g} · {c['probe_family']} · "
            f"track {c['track']} · {c['hook_scope']}")


def margin(m: dict | None) -> str:
    """A control margin ``+est [lo, hi] (n=pairs)``; ``n/a`` when absent."""
    return "n/a" if not m else f"{m['estimate']:+.4f} {ci(m['ci'])} (n={m['pairs']})"
