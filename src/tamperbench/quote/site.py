"""Exact Words' part of the report site: faithful rates, the failure taxonomy per model and arm, a
taxonomy figure and a per-response page (gold sentence, answer, verdict and its evidence).

Computed from the scored records at build time through the suite's own summary, so the site and
``quote table`` agree by construction.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from tamperbench.report.site.model import Plot, RunInfo, Section
from tamperbench.report.site.tables import Cell, LeaderTable, cell


def _rate_table(summary: dict) -> LeaderTable:
    t = LeaderTable(slug="quote-faithful", title="Exact Words: byte-faithful quotes per model and arm",
                    columns=["model", "preset", "arm", "n", "faithful", "rate", "95% Wilson CI",
                             "+ normalised", "corrected / dirty"],
                    note="faithful = byte-identical to the gold sentence; '+ normalised' adds answers equal after "
                         "conservative normalisation (recorded separately, never counted as faithful)")
    for r in summary["rates"]:
        lo, hi = r["ci95"]
        t.add(r["model"], r["preset"], r["arm"], r["n"], r["faithful"],
              Cell(f"{r['faithful_rate']:.1%}", r["faithful_rate"]), Cell(f"{lo:.1%} to {hi:.1%}", lo),
              r["faithful_incl_normalized"], Cell(f"{r['corrected']}/{r['dirty_n']}", r["corrected"]))
    return t


def _taxonomy_table(rows: list[dict], categories: tuple[str, ...]) -> LeaderTable:
    t = LeaderTable(slug="quote-taxonomy", title="Exact Words: verdicts per model and arm (responses per class)",
                    columns=["model", "arm", *categories])
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in rows:
        counts[(r["model_label"], r["arm"])][r["category"]] += 1
    for (model, arm), c in sorted(counts.items()):
        t.add(model, arm, *[cell(c.get(k, 0)) for k in categories])
    return t


def _plot_taxonomy(rows: list[dict], categories: tuple[str, ...]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    groups = sorted({(r["model_label"], r["arm"]) for r in rows})
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.45 * len(groups)))
    left = np.zeros(len(groups))
    for k in categories:
        vals = np.array([sum(1 for r in rows if (r["model_label"], r["arm"]) == g and r["category"] == k)
                         for g in groups], dtype=float)
        ax.barh(range(len(groups)), vals, left=left, label=k)
        left += vals
    ax.set_yticks(range(len(groups)), [f"{m[:40]} / {a}" for m, a in groups], fontsize=8)
    ax.set_xlabel("responses")
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    return fig


def build_section(runs: list[RunInfo], writer) -> Section:
    from tamperbench.quote.scorer import CATEGORIES
    from tamperbench.quote.tables import load_rows, summarise

    rows = load_rows([r.path for r in runs])
    summary = summarise(rows)
    section = Section(suite="quote", title="Exact Words",
                      tables=[_rate_table(summary), _taxonomy_table(rows, CATEGORIES)])
    if rows:
        section.plots.append(Plot("Verdicts per model and arm", writer.figure(_plot_taxonomy(rows, CATEGORIES),
                                                                               "quote_taxonomy")))
    payload = [{"item": r["item_id"], "arm": r["arm"], "model": r["model_label"], "gold": r["gold"],
                "answer": r.get("answer") if r.get("answer") is not None else r["response"],
                "response": r["response"], "category": r["category"], "sub_label": r.get("sub_label") or "",
                "evidence": r.get("evidence") or {}} for r in rows]
    src = writer.data_script("data/quote/responses.js", "responses", payload)
    writer.render("quote_viewer.html.j2", "viewer/quote.html", title="Exact Words responses", data_src=src,
                  categories=list(CATEGORIES))
    section.pages.append({"title": "Responses: gold sentence, answer, verdict and evidence",
                          "href": "viewer/quote.html", "note": f"{len(rows)} responses"})
    return section
