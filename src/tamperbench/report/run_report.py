"""A static report of one or more runs: ``report.md`` + ``index.html`` + PNG plots.

Deliberately small: the leaderboard site is a later wave. This page is what ``make demo`` ends
on, so a newcomer sees the tables and the plots of their first run in a browser. Model text is
HTML-escaped: replies are untrusted.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from tamperbench.report.plots import (plot_label_rates, plot_quote_categories, plot_swap_profiles,
                                      swap_aligned_profiles)
from tamperbench.schema import JUDGE_LABELS as LABELS
from tamperbench.markdown import escape_markdown, inline_to_html, split_row
from tamperbench.store import RunStore
from tamperbench.store.run_store import read_spec
from tamperbench.suites import get_suite


def sleight_section(run: Path, out: Path) -> tuple[list[str], list[str]]:
    md, imgs = [f"## Sleight of Word: `{run}`", ""], []
    with RunStore.open_existing(run, read_only=True) as store:
        clean, trials = store.rows("sleight_clean"), store.rows("sleight_trials")
        verdicts = store.rows("judge_verdicts")
        window = int(store.spec_dict.get("window", 8))
    if (run / "tables.md").is_file():
        md += [(run / "tables.md").read_text(), ""]
    touched = [t for t in trials if not t["untouched"]]
    md.append(f"{len(trials)} trials, {len(touched)} with at least one swap, "
              f"{sum(t['swap_count'] for t in trials)} swaps in all.")
    if touched:
        prof = swap_aligned_profiles(clean, trials, window=window)
        png = plot_swap_profiles(prof, out / "sleight_swap_profile.png",
                                 "Signal after each swap vs the unaltered branch from the same prefix")
        imgs.append(png.name)
        md += ["", f"![swap profile]({png.name})", "",
               "Mean at each of the 8 tokens the reference-rule Delta collects after a swap (tampered), the "
               "matched branch that kept the trigger (same prefix), and the clean-answer baseline each Delta "
               "subtracts; the panel title gives the Delta of Tables 1 and 2.", ""]
        (out / "sleight_swap_profile.json").write_text(json.dumps(prof, indent=1))
    if verdicts:
        rates, counts = {}, []
        for label in LABELS:
            vals = [v[label] for v in verdicts if v.get(label) is not None]
            rates[label] = sum(vals) / len(vals) if vals else None
            counts.append(f"{label} {len(vals)}")
        png = plot_label_rates(rates, out / "judge_labels.png",
                               f"Jury majority labels over {len(verdicts)} judged replies\n"
                               f"(replies with a majority: {', '.join(counts)})")
        imgs.append(png.name)
        md += [f"![judge labels]({png.name})", ""]
    examples = [t for t in touched if t["reaction_text"].strip()][:3]
    if examples:
        md += ["### Example tampered replies", ""]
        for t in examples:
            md += [f"- **{escape_markdown(t['question'])}** (\"{escape_markdown(t['trigger'])}\" -> "
                   f"\"{escape_markdown(t['substitution'])}\", {t['swap_count']} swaps): "
                   f"\"{escape_markdown(t['reaction_text'].strip()[:400])}\""]  # model text: inert Markdown
        md.append("")
    return md, imgs


def quote_section(run: Path, out: Path) -> tuple[list[str], list[str]]:
    md = [f"## Exact Words: `{run}`", ""]
    with RunStore.open_existing(run, read_only=True) as store:
        rows = store.rows("quote_trials")
    for name in ("quote_table.md", "tables.md"):
        if (run / name).is_file():
            md += [(run / name).read_text(), ""]
            break
    imgs = []
    if rows:
        png = plot_quote_categories(rows, out / "quote_categories.png", "Exact Words verdicts per instruction arm")
        imgs.append(png.name)
        md += [f"![quote categories]({png.name})", ""]
    return md, imgs


def build_report(runs: list[Path], out: Path, title: str = "tamperbench report") -> Path:
    """Write ``out/report.md`` and ``out/index.html`` covering every run given."""
    out.mkdir(parents=True, exist_ok=True)
    md = [f"# {title}", ""]
    for run in runs:
        spec = read_spec(run / "spec.json")  # garbage: one line naming the file
        suite = get_suite(spec.get("suite"), f"{run / 'spec.json'}: field 'suite'")
        if suite.report is None:
            md += [f"## {suite.name}: `{run}`", "", f"(suite {suite.name!r} has no report section)", ""]
            continue
        part, _ = suite.part("report")(run, out)
        md += part
    text = "\n".join(md)
    (out / "report.md").write_text(text)
    (out / "index.html").write_text(_markdown_to_html(text, title))
    return out / "index.html"


_IMAGE = re.compile(r"!\[[^\]]*\]\(([\w.-]+\.png)\)")


def _inline(text: str) -> str:
    """Escape first, then turn **bold** and `code` into tags (the escaped text holds no tags)."""
    return inline_to_html(text)  # honours the backslash escapes escape_markdown puts on model text


def _markdown_to_html(text: str, title: str) -> str:
    """Tiny renderer for the subset report.md uses (headings, images, tables, bullets, paragraphs)."""
    body, in_table = [], False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|"):
            cells = split_row(s)  # an escaped \| stays inside its cell
            if all(set(c) <= set("-: ") for c in cells):
                continue
            if not in_table:
                body.append("<table>")
                in_table = True
            body.append("<tr>" + "".join(f"<td>{inline_to_html(c)}</td>" for c in cells) + "</tr>")
            continue
        if in_table:
            body.append("</table>")
            in_table = False
        if image := _IMAGE.fullmatch(s):  # only our own plot files; any other "![" line is text
            src = image.group(1)
            body.append(f'<p><img src="{html.escape(src)}" alt="{html.escape(src)}"></p>')
        elif s.startswith("#"):
            level = len(s) - len(s.lstrip("#"))
            body.append(f"<h{level}>{_inline(s[level:].strip())}</h{level}>")
        elif s.startswith("- "):
            body.append(f"<li>{_inline(s[2:])}</li>")
        elif s:
            body.append(f"<p>{_inline(s)}</p>")
    if in_table:
        body.append("</table>")
    style = ("body{font-family:sans-serif;max-width:1000px;margin:2em auto}table{border-collapse:collapse}"
             "td{border:1px solid #ccc;padding:2px 6px;font-size:13px}img{max-width:100%}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>")
