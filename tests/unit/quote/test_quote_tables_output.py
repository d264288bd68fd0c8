"""The quote tables as a reader sees them: exact Markdown (worked out by hand), the printed tables, the
saved files. Wilson intervals checked against statsmodels in test_quote_runner_spec.py: (1, 2) ->
9.5%-90.5%, (0, 2) -> 0.0%-65.8%, (2, 4) -> 15.0%-85.0%."""

import io
import json

from rich.console import Console

from tamperbench.quote.tables import render, summarise, to_markdown, write_tables


def _row(arm, cat, sub=None, item="S01", dirty=False, planted=None):
    return {"model_label": "a", "preset": "standard", "arm": arm, "item_id": item, "category": cat,
            "sub_label": sub, "dirty": dirty, "repeat": 0, "gold": "g " + item,
            "evidence": {"planted_span_present": planted} if dirty else {}}


ROWS = [_row("plain", "faithful"), _row("plain", "truncated", "prefix", item="S02"),
        _row("strict", "faithful_normalized", "quotes"),
        _row("strict", "rewritten", "lead_in", item="S02", dirty=True, planted=True)]

EXPECTED = """# Exact Words summary

| model | preset | arm | n | faithful | rate | 95% CI | +normalized | corrected/dirty |
|---|---|---|---|---|---|---|---|---|
| a | standard | plain | 2 | 1 | 50.0% | 9.5%-90.5% | 1 | 0/0 |
| a | standard | strict | 2 | 0 | 0.0% | 0.0%-65.8% | 1 | 0/1 |

## Faithful rate per arm, pooled over models

| group | n | faithful | rate | 95% CI |
|---|---|---|---|---|
| plain | 2 | 1 | 50.0% | 9.5%-90.5% |
| strict | 2 | 1 | 50.0% | 9.5%-90.5% |

## Faithful rate per model, over both arms

| group | n | faithful | rate | 95% CI |
|---|---|---|---|---|
| a | 4 | 2 | 50.0% | 15.0%-85.0% |

## Failure taxonomy (paper)

| arm | faithful | corrected | truncated | wrong_span | rewritten |
|---|---|---|---|---|---|
| plain | 1 | 0 | 1 | 0 | 0 |
| strict | 1 | 0 | 0 | 0 | 1 |

## Sub-labels

| class | sub-label | count |
|---|---|---|
| truncated | prefix | 1 |
| faithful\\_normalized | quotes | 1 |
| rewritten | lead\\_in | 1 |

## Hardest items

| item | failed | most common failure | gold |
|---|---|---|---|
| S02 | 2/2 | truncated/prefix | g S02 |

## Paper view

- corrected/dirty counts the paper's corrected; the repeat spread counts faithful as the paper's headline faithful: \
exact or the normalised match.
- Paper taxonomy (paper): faithful = exact or the normalised match (curly quotes, unicode dashes, whitespace); a quote \
that fixes the planted error is corrected whatever else changed (the fix decides first); no_answer (nothing left after \
stripping reasoning, or an empty reply) counts as rewritten, the paper having no such class; a clause cut short with \
an invented terminal period counts as rewritten (the seed: a single invented character makes the quote "no longer \
exist in the source"; --taxonomy paper-period-truncated counts it truncated).
"""


def test_markdown_exactly():
    assert to_markdown(summarise(ROWS, taxonomy="paper")) == EXPECTED


def test_printed_tables_and_saved_files(tmp_path):
    summary = summarise(ROWS, taxonomy="paper")
    buf = io.StringIO()
    render(summary, Console(file=buf, width=250))
    text = " ".join(buf.getvalue().split())  # rich wraps titles wider than their table
    for needle in ("Exact Words: faithful (byte-identical) rate per model and arm",
                   "Faithful (paper's faithful (exact or normalised)) rate per arm, pooled over models",
                   "Faithful (paper's faithful (exact or normalised)) rate per model, over both arms",
                   "Failure taxonomy (responses per class; paper taxonomy)", "Near-miss sub-labels",
                   "Hardest items", "Failed quotes of dirty items that kept the planted error: 1",
                   "repeat spread", "corrected/dirty", "9.5%-90.5%", "15.0%-85.0%", "truncated/prefix", "0/1"):
        assert needle in text, needle
    ours = io.StringIO()
    render(summarise(ROWS), Console(file=ours, width=250))
    assert "Faithful (byte-identical) rate per arm" in ours.getvalue()
    assert "faithful_normalized" in ours.getvalue() and "no_answer" in ours.getvalue()
    j, m = write_tables(summary, tmp_path / "out")
    assert (j.name, m.name) == ("quote_table.json", "quote_table.md")
    assert json.loads(j.read_text())["taxonomy_name"] == "paper" and m.read_text() == EXPECTED
