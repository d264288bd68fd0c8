"""OWMI forest plots: one figure per model, one row per detection cell, where the detection and claim tables
are walls of text.

Left panel: the cell's AUROC against paired sham with its 95% item-clustered interval (chance 0.5 dashed);
right panel: the margin over sham (hit rate minus false-alarm rate, complete pairs) with its interval (0
dashed). Each row's marker carries the cell's claim level (``L0``..``L5``) and its colour, so the strongest
claim the data license is read off the picture. The known positive and its unadapted base (``owmi
known-positive --check`` rows, when given) sit on the same axes, below a rule, as the scale's two ends:
what a detector looks like, and the leakage floor.
"""

from __future__ import annotations

import math
from collections import defaultdict

LEVEL_COLOURS = ("#888888", "#4c72b0", "#55a868", "#c44e52", "#8172b2", "#dd8452")


def short_label(c: dict) -> str:
    """A cell in one short line: operator@dose, site, track, scope and read-out (benchmark and family are the
    figure's, not the row's)."""
    readout = c.get("readout") or "generated"
    return (f"{c['operator']}@{c['dose']:g} · {c['site']} · {c['track']} · {c['hook_scope']}"
            + ("" if readout == "generated" else f" · {readout}"))


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def forest_rows(result: dict) -> dict[str, list[dict]]:
    """Detection cells per model label: label, AUROC and margin with intervals, claim level, verdict name."""
    from tamperbench.owmi.score import identity

    who = identity.result_labels(result)
    out: dict[str, list[dict]] = defaultdict(list)
    for c in result.get("cells", []):
        comp = (c.get("detection") or {}).get("complete")
        if not comp or not comp.get("pairs"):
            continue
        verdict = comp.get("verdict") or {}
        out[who[identity.of(c["cell"])]].append({
            "label": short_label(c["cell"]), "auroc": comp.get("auroc"), "auroc_ci": comp.get("auroc_ci"),
            "margin": comp.get("margin"), "margin_ci": comp.get("margin_ci"), "items": comp.get("items"),
            "level": (c.get("claim") or {}).get("level"), "verdict": verdict.get("name"), "anchor": False})
    return dict(out)


def anchor_rows(positive_rows: list[dict]) -> list[dict]:
    """The known-positive check's rows (``positive_check.rows_of``) as forest rows, the base named the floor."""
    out = []
    for r in positive_rows:
        if not r.get("pairs"):
            continue
        role = "known positive" if r["role"].startswith("adapted") else "leakage floor (unadapted)"
        out.append({"label": f"{role} · {r['readout']}", "auroc": r["auroc"], "auroc_ci": r["auroc_ci"],
                    "margin": r["margin"], "margin_ci": r["margin_ci"], "items": r["items"], "level": None,
                    "verdict": None, "anchor": True})
    return out


def _panel(ax, rows: list[dict], key: str, ref: float, xlabel: str) -> None:
    for y, r in enumerate(rows):
        est, ci = r[key], r[f"{key}_ci"] or [None, None]
        if not _finite(est):
            ax.text(ref, y, "n/a", ha="center", va="center", fontsize=7, color="#666")
            continue
        lo = ci[0] if _finite(ci[0]) else est
        hi = ci[1] if _finite(ci[1]) else est
        colour = "#222222" if r["anchor"] else LEVEL_COLOURS[min(int(r["level"] or 0), len(LEVEL_COLOURS) - 1)]
        # the interval as drawn from its ends, the estimate as a mark: a percentile bootstrap interval need not
        # contain its point estimate (a skewed resample, or float rounding at a bound), and matplotlib's errorbar
        # refuses the negative half-width that would take
        ax.hlines(y, lo, hi, color=colour, lw=1.2)
        ax.vlines([lo, hi], y - 0.15, y + 0.15, color=colour, lw=1.2)
        ax.plot([est], [y], "D" if r["anchor"] else "o", color=colour, ms=5)
        if key == "auroc" and not r["anchor"] and r["level"] is not None:
            ax.annotate(f"L{r['level']}", (est, y), xytext=(6, 3), textcoords="offset points", fontsize=7,
                        color=colour)
    ax.axvline(ref, color="#888", ls="--", lw=1)
    ax.set_xlabel(xlabel)


def forest_figure(model: str, rows: list[dict], anchors: list[dict]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    every = rows + anchors
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.9 + 0.32 * max(3, len(every))), sharey=True, squeeze=False)
    _panel(axes[0][0], every, "auroc", 0.5, "AUROC vs paired sham (95% CI)")
    _panel(axes[0][1], every, "margin", 0.0, "margin over sham: hit - false alarm (95% CI)")
    axes[0][0].set_xlim(-0.02, 1.02)
    axes[0][1].set_xlim(-1.02, 1.02)
    axes[0][0].set_yticks(range(len(every)), [r["label"] for r in every], fontsize=7)
    axes[0][0].invert_yaxis()
    if anchors and rows:
        for ax in axes[0]:
            ax.axhline(len(rows) - 0.5, color="#bbb", lw=0.8)
    axes[0][0].set_title(model[:70], loc="left", fontsize=9)
    fig.tight_layout()
    return fig


def forest_figures(result: dict, positive_rows: list[dict] | None = None) -> list[tuple[str, str, object, str]]:
    """(stem, title, figure, caption) per model; the anchors' rows go on every model's axes."""
    anchors = anchor_rows(positive_rows or [])
    figs = []
    for i, (model, rows) in enumerate(sorted(forest_rows(result).items())):
        figs.append((f"owmi_forest_{i}", f"Forest plot: {model}", forest_figure(model, rows, anchors),
                     "per detection cell: AUROC and margin over paired sham with 95% item-clustered intervals; "
                     "marker colour and L-number: the cell's claim level; diamonds below the rule: the known "
                     "positive and its unadapted base (the leakage floor)"))
    return figs
