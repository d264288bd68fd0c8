"""Summaries of quote runs: faithful rate per model and arm, failure taxonomy, hardest items.

Also the paper's pooled views: the faithful rate per arm pooled over models ("Plain arm: 95.0%")
and per model over both arms ("GPT-OSS-20B: 89.2%"), each with a Wilson interval. With
``taxonomy="paper"`` (or ``paper-period-truncated``) the class counts use the paper's five classes
(``quote/taxonomy.py``), the ``corrected/dirty`` column counts the paper's corrected, and "faithful"
in the pooled views and the repeat spread is the paper's headline one (byte-identical or normalised
match); with ``ours`` it is byte-identical only, as in the per-model-and-arm table.

Computed from the stored, scored records only (never re-generated), so ``quote table`` on a
copied run directory reproduces the numbers exactly. Saved as JSON (for scripts) and markdown
(for reading) next to the records.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tamperbench.quote import sampling as sampling_rule
from tamperbench.quote.runner import TABLE
from tamperbench.quote.scorer import CATEGORIES
from tamperbench.quote.taxonomy import PAPER_CLASSES, is_paper, paper_class, paper_notes
from tamperbench.stats.intervals import wilson  # noqa: F401  (re-exported: the one Wilson interval lives in stats)
from tamperbench.safeio.files import atomic_write
from tamperbench.store import RunStore


def load_rows(run_dirs: list[Path]) -> list[dict]:
    """Scored records of every run, each tagged with a readable model label from its provenance."""
    rows = []
    for run in run_dirs:
        store = RunStore.open_existing(run, read_only=True)
        try:
            prov = {pid: json.loads(rec) for pid, rec in store.con.execute("SELECT id, record FROM provenance").fetchall()}
            for r in store.rows(TABLE):
                p = prov.get(r["provenance_id"], {})
                r["model_label"] = f"{p.get('source', r['model'])} [{p.get('sha256', '?')[:12]}, {p.get('dtype', '?')}]"
                r["run"] = str(run)
                rows.append(r)
        finally:
            store.close()
    return rows


def row_class(r: dict, taxonomy: str) -> str:
    """A stored verdict's class under ``taxonomy``: ours, or the paper's (read with its evidence)."""
    if is_paper(taxonomy):
        return paper_class(r["category"], r["sub_label"], r.get("evidence"), taxonomy)
    return r["category"]


def _is_faithful(r: dict, taxonomy: str) -> bool:
    return row_class(r, taxonomy) == "faithful"


def spread_faithful(taxonomy: str) -> str:
    """What the repeat spread counts as faithful under ``taxonomy`` (named in every table)."""
    return ("the paper's headline faithful: exact or the normalised match" if is_paper(taxonomy)
            else "byte-identical")


def pooled_rates(rows: list[dict], key: str, taxonomy: str = "ours") -> list[dict]:
    """Faithful rate grouped by ``key`` ("arm": pooled over models; "model_label": over both arms)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r[key]].append(r)
    out = []
    for name, rs in sorted(groups.items()):
        k = sum(_is_faithful(r, taxonomy) for r in rs)
        lo, hi = wilson(k, len(rs))
        out.append({key: name, "n": len(rs), "faithful": k, "faithful_rate": k / len(rs), "ci95": [lo, hi]})
    return out


def _sampling_of(rows: list[dict]) -> str:
    """How a group's responses were drawn (quote/sampling.py), from its records."""
    kinds = sorted({(r.get("sampling"), float(r.get("temperature") or 0.0)) for r in rows}, key=str)
    repeats = len({r.get("repeat", 0) for r in rows})
    return "; ".join(sampling_rule.describe(s, t, repeats) for s, t in kinds)


def summarise(rows: list[dict], top: int = 10, taxonomy: str = "ours") -> dict:
    by_model_arm: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        by_model_arm[(r["model_label"], r["preset"], r["arm"])].append(r)
    rates = []
    for (model, preset, arm), rs in sorted(by_model_arm.items()):
        n = len(rs)
        k = sum(r["category"] == "faithful" for r in rs)
        kn = sum(r["category"] in ("faithful", "faithful_normalized") for r in rs)
        reps = sampling_rule.spread(rs, lambda r: _is_faithful(r, taxonomy), lambda r: row_class(r, taxonomy))
        lo, hi = wilson(k, n)
        dirty = [r for r in rs if r["dirty"]]
        rates.append({
            "model": model, "preset": preset, "arm": arm, "n": n, "faithful": k, "faithful_rate": k / n,
            "ci95": [lo, hi], "faithful_incl_normalized": kn,
            "dirty_n": len(dirty), "corrected": sum(row_class(r, taxonomy) == "corrected" for r in dirty),
            **reps, "sampling": _sampling_of(rs),
        })
    classes = PAPER_CLASSES if is_paper(taxonomy) else CATEGORIES
    counts = Counter((r["arm"], row_class(r, taxonomy)) for r in rows)
    sub = Counter((r["category"], r["sub_label"]) for r in rows if r["category"] not in ("faithful",))
    preserved = [r for r in rows if r["dirty"] and r["category"] not in ("faithful", "faithful_normalized")
                 and (r.get("evidence") or {}).get("planted_span_present")]
    per_item: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        per_item[r["item_id"]].append(r)
    hardest = []
    for item_id, rs in per_item.items():
        fails = [r for r in rs if r["category"] not in ("faithful", "faithful_normalized")]
        common = Counter(f"{r['category']}/{r['sub_label'] or '-'}" for r in fails).most_common(1)
        hardest.append({"item_id": item_id, "failures": len(fails), "attempts": len(rs),
                        "most_common": common[0][0] if common else None, "gold": rs[0]["gold"]})
    hardest.sort(key=lambda h: (-h["failures"] / h["attempts"], h["item_id"]))
    return {
        "rates": rates,
        "sampling": sorted({r["sampling"] for r in rates}),
        "taxonomy_name": taxonomy,
        "spread_faithful": spread_faithful(taxonomy),
        "corrected_counts": "the paper's corrected" if is_paper(taxonomy) else "our corrected class",
        "notes": paper_notes(taxonomy),
        "classes": list(classes),
        "taxonomy": {arm: {c: counts.get((arm, c), 0) for c in classes} for arm in sorted({a for a, _ in counts})},
        "pooled_by_arm": pooled_rates(rows, "arm", taxonomy),
        "per_model": pooled_rates(rows, "model_label", taxonomy),
        "sub_labels": [{"category": c, "sub_label": s, "count": n} for (c, s), n in sub.most_common()],
        "failed_dirty_with_planted_error_intact": len(preserved),
        "hardest_items": [h for h in hardest if h["failures"]][:top],
    }


def _sampled(summary: dict) -> bool:
    """Whether any response was sampled (the line naming the sampling is printed then; greedy is the default)."""
    return any(not d.startswith("greedy") for d in summary.get("sampling", []))


def render(summary: dict, console: Console) -> None:
    t = Table(title="Exact Words: faithful (byte-identical) rate per model and arm")
    for col in ("model", "preset", "arm", "n", "faithful", "rate", "95% CI", "+normalized", "corrected/dirty", "repeat spread"):
        t.add_column(col, overflow="fold")
    for r in summary["rates"]:
        spread = "-" if r["repeat_spread"] is None else (
            f"{r['repeat_spread']:.1%} over {r['repeats']} (sd {r['repeat_sd']:.1%}; "
            f"{r['items_changing']}/{r['items']} items change class)")
        t.add_row(escape(r["model"]), r["preset"], r["arm"], str(r["n"]), str(r["faithful"]), f"{r['faithful_rate']:.1%}",
                  f"{r['ci95'][0]:.1%}-{r['ci95'][1]:.1%}", str(r["faithful_incl_normalized"]),
                  f"{r['corrected']}/{r['dirty_n']}", spread)
    console.print(t)
    if _sampled(summary):
        console.print("Sampling: " + " | ".join(summary["sampling"]), highlight=False)
    what = "paper's faithful (exact or normalised)" if is_paper(summary.get("taxonomy_name", "ours")) else "byte-identical"
    for key, title in (("pooled_by_arm", f"Faithful ({what}) rate per arm, pooled over models"),
                       ("per_model", f"Faithful ({what}) rate per model, over both arms")):
        p = Table(title=title)
        for col in ("arm" if key == "pooled_by_arm" else "model", "n", "faithful", "rate", "95% CI"):
            p.add_column(col, overflow="fold")
        for r in summary.get(key, []):
            name = r["arm"] if key == "pooled_by_arm" else r["model_label"]
            p.add_row(escape(name), str(r["n"]), str(r["faithful"]), f"{r['faithful_rate']:.1%}",
                      f"{r['ci95'][0]:.1%}-{r['ci95'][1]:.1%}")
        console.print(p)
    classes = summary.get("classes", list(CATEGORIES))
    tax = Table(title=f"Failure taxonomy (responses per class; {summary.get('taxonomy_name', 'ours')} taxonomy)")
    tax.add_column("arm")
    for c in classes:
        tax.add_column(c)
    for arm, counts in summary["taxonomy"].items():
        tax.add_row(arm, *(str(counts[c]) for c in classes))
    console.print(tax)
    sub = Table(title="Near-miss sub-labels")
    for col in ("class", "sub-label", "count"):
        sub.add_column(col)
    for s in summary["sub_labels"]:
        sub.add_row(s["category"], s["sub_label"] or "-", str(s["count"]))
    console.print(sub)
    hard = Table(title="Hardest items")
    for col in ("item", "failed", "most common failure", "gold sentence"):
        hard.add_column(col)
    for h in summary["hardest_items"]:
        hard.add_row(h["item_id"], f"{h['failures']}/{h['attempts']}", h["most_common"] or "-", escape(h["gold"][:70]))
    console.print(hard)
    console.print(f"Failed quotes of dirty items that kept the planted error: "
                  f"{summary['failed_dirty_with_planted_error_intact']}")
    for line in paper_lines(summary):
        console.print(line, highlight=False)


def paper_lines(summary: dict) -> list[str]:
    """Under a paper taxonomy: what corrected/dirty and the repeat spread count, and the mapping's notes
    (under ``ours`` the table titles already say it: byte-identical, our classes)."""
    if not is_paper(summary.get("taxonomy_name", "ours")):
        return []
    return [f"corrected/dirty counts {summary['corrected_counts']}; the repeat spread counts faithful as "
            f"{summary['spread_faithful']}.", *summary.get("notes", [])]


def to_markdown(summary: dict) -> str:
    from tamperbench.safeio.markdown import markdown_table  # model names and text: inert Markdown

    def pct(r: dict) -> list[str]:
        return [f"{r['faithful_rate']:.1%}", f"{r['ci95'][0]:.1%}-{r['ci95'][1]:.1%}"]

    parts = ["# Exact Words summary", "", *([f"Sampling: {' | '.join(summary['sampling'])}", ""]
                                           if _sampled(summary) else []), markdown_table(
        ["model", "preset", "arm", "n", "faithful", "rate", "95% CI", "+normalized", "corrected/dirty"],
        [[r["model"], r["preset"], r["arm"], r["n"], r["faithful"], *pct(r), r["faithful_incl_normalized"],
          f"{r['corrected']}/{r['dirty_n']}"] for r in summary["rates"]])]
    for key, title in (("pooled_by_arm", "Faithful rate per arm, pooled over models"),
                       ("per_model", "Faithful rate per model, over both arms")):
        rows = [[r["arm"] if key == "pooled_by_arm" else r["model_label"], r["n"], r["faithful"], *pct(r)]
                for r in summary.get(key, [])]
        parts += ["", markdown_table(["group", "n", "faithful", "rate", "95% CI"], rows, title, level=2)]
    classes = summary.get("classes", list(CATEGORIES))
    parts += ["", markdown_table(["arm", *classes], [[arm, *(counts[c] for c in classes)]
                                                     for arm, counts in summary["taxonomy"].items()],
                                 f"Failure taxonomy ({summary.get('taxonomy_name', 'ours')})", level=2)]
    parts += ["", markdown_table(["class", "sub-label", "count"],
                                 [[s["category"], s["sub_label"] or "-", s["count"]] for s in summary["sub_labels"]],
                                 "Sub-labels", level=2)]
    parts += ["", markdown_table(["item", "failed", "most common failure", "gold"],
                                 [[h["item_id"], f"{h['failures']}/{h['attempts']}", h["most_common"] or "-", h["gold"]]
                                  for h in summary["hardest_items"]], "Hardest items", level=2)]
    notes = paper_lines(summary)
    if notes:
        parts += ["", "## Paper view", "", *("- " + n for n in notes)]
    return "\n".join(parts) + "\n"


def write_tables(summary: dict, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    j, m = out_dir / "quote_table.json", out_dir / "quote_table.md"
    atomic_write(j, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    atomic_write(m, to_markdown(summary))
    return j, m
