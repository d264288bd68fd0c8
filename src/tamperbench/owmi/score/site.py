"""OWMI's part of the report site: each model's reportability profile, the detection table, the
claim verdicts, and the three figures readers of the paper look at.

Everything comes from :func:`tamperbench.owmi.score.profile.score_runs` at build time, the same
numbers ``tamperbench owmi score`` prints. Models are named by their identity's label (name,
revision, dtype, quantized: ``owmi.analysis.identity``), as in the Markdown: one name run at two
precisions is two rows, never two rows a reader cannot tell apart. Every cell text goes through the
site's escaping (the templates and ``tables.escape_cell``): model names are untrusted. Anchor runs (linear probe, known positive) given beside
engine runs appear in the three-channel figure.
"""

from __future__ import annotations

import math
from collections import defaultdict

from tamperbench.report.site.model import Plot, RunInfo, Section
from tamperbench.report.site.tables import Cell, LeaderTable, cell

CONDITIONS = ("intervention", "sham", "random_matched", "random_unit", "observer")


def _ci_cell(est, ci, digits: int = 3) -> Cell:
    if est is None or (isinstance(est, float) and not math.isfinite(est)):
        return Cell("", None)
    text = f"{est:.{digits}f}"
    if ci and all(v is not None and math.isfinite(v) for v in ci):
        text += f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return Cell(text, float(est))


def _tables(result: dict) -> list[LeaderTable]:
    from tamperbench.owmi.score import identity
    from tamperbench.owmi.score.fmt import cell_label
    from tamperbench.owmi.score.render import detection_rows

    who = identity.result_labels(result)

    det = LeaderTable(slug="owmi-detection", title="OWMI detection against paired sham (complete-pair coding; "
                      "95% item-clustered bootstrap intervals)",
                      columns=["model", "cell", "pairs", "d'", "AUROC", "BH q", "margin vs random",
                               "margin vs observer", "parsed / attempted", "claim level",
                               "verdict (item permutation p, items)"])
    for r in detection_rows(result):
        c = next(c for c in result["cells"] if c.get("detection") and cell_label(c["cell"]) == r["cell"]
                 and who[identity.of(c["cell"])] == r["identity"])
        comp = c["detection"]["complete"]
        det.add(r["identity"], r["cell"], cell(r["pairs"]), _ci_cell(comp["dprime"], comp["dprime_ci"]),
                _ci_cell(comp["auroc"], comp["auroc_ci"]), cell(r["bh_q"], "{:.3g}"),
                Cell(r["margin_random"] + (f" ({r['random_kind']})" if r["random_kind"] else "")),
                Cell(r["margin_observer"]), Cell(r["parse"]), cell(r["claim_level"]),
                Cell(f"{r.get('verdict') or 'n/a'} (p = {'n/a' if r.get('p_value') is None else format(r['p_value'], '.3g')}"
                     f", {r.get('items')} items)"))
    prof = LeaderTable(slug="owmi-profile", title="Reportability profile per model and cell (never collapsed into "
                       "one number)", columns=["model", "cell", "hit rate", "false-alarm rate", "d'", "AUROC",
                                               "confidence: selective AUROC", "confidence: ECE"])
    claims = LeaderTable(slug="owmi-claims", title="Claim verdicts (Appendix D.5): the strongest claim the data license",
                         columns=["model", "cell", "level", "claim", "held", "failed", "not measured"])
    for c in result["cells"]:
        label = cell_label(c["cell"])
        d = (c.get("detection") or {}).get("complete")
        k = c.get("confidence") or {}
        if d:
            prof.add(who[identity.of(c["cell"])], label, cell(d["hit_rate"], "{:.3f}"), cell(d["false_alarm_rate"], "{:.3f}"),
                     cell(d["dprime"], "{:.3f}"), cell(d["auroc"], "{:.3f}"), cell(k.get("selective_auroc"), "{:.3f}"),
                     cell(k.get("ece_equal_mass_10"), "{:.3f}"))
        if "claim" in c:
            v = c["claim"]
            claims.add(who[identity.of(c["cell"])], label, cell(v["level"]), v["claim"], "; ".join(v["held"]),
                       "; ".join(v["failed"]), "; ".join(v["not_measured"]))
    return [prof, det, claims, _model_claims_table(result), _decay_table(result), _recon_table(result),
            _closedset_table(result)]


def _closedset_table(result: dict) -> LeaderTable:
    """Localization / characterization (Section 3.2): accuracy against chance, paired margin over sham, macro-F1."""
    from tamperbench.owmi.score.closedset import closedset_rows

    t = LeaderTable(slug="owmi-closedset", title="Localization and characterization: accuracy against chance and "
                    "macro-F1 (complete coding; 95% item-clustered bootstrap intervals)",
                    columns=["model", "cell", "scored", "accuracy", "chance", "margin vs sham", "macro-F1 (chance)",
                             "parsed / attempted"])
    for r in closedset_rows(result):
        f1 = (Cell(f"{r['macro_f1']:.3f} {r['macro_f1_ci']} ({r['macro_f1_chance']:.3f})", r["macro_f1"])
              if r["macro_f1"] is not None else Cell(""))
        mg = (Cell(f"{r['margin_vs_sham']:+.3f} {r['margin_vs_sham_ci']}", r["margin_vs_sham"])
              if r["margin_vs_sham"] is not None else Cell(""))
        acc = (Cell(f"{r['accuracy']:.3f} {r['accuracy_ci']}", r["accuracy"]) if r["scored"]
               else Cell(f"no parsed report ({r['note']})"))
        t.add(r["identity"], r["cell"], cell(r["scored"]), acc, cell(r["chance"], "{:.3f}"), mg, f1, Cell(r["parse"]))
    return t


def _recon_table(result: dict) -> LeaderTable:
    """Rule-scored reconstruction margins per cell (Eq. 8) and Eq. 17; the note names the paper's rule
    (not scored) beside ours, and that no claim rests on them without human validation (D.3)."""
    from tamperbench.owmi.score.recon_rule import PAPER, RULE
    from tamperbench.owmi.score.reconstruction import reconstruction_rows, scoring

    t = LeaderTable(slug="owmi-reconstruction", title=f"Reconstruction, {scoring(result)} (complete-pair coding; "
                    "95% item-clustered bootstrap intervals)",
                    columns=["model", "cell", "pairs", "accuracy int / sham", "margin vs sham", "margin vs random",
                             "margin vs observer (max over tiers)", "chance", "parsed / attempted", "unscorable pairs",
                             "Eq. 17 literal / decision"],
                    note=f"{PAPER}. Ours: {RULE}. Eq. 17: detection beats sham and reconstruction does not beat the "
                         "observer bound (literal: point estimates; decision: the intervals the claim rule reads).")
    for r in reconstruction_rows(result):
        acc = [r["accuracy_intervention"], r["accuracy_sham"]]
        t.add(r["identity"], r["cell"], cell(r["pairs_vs_sham"]),
              Cell(" / ".join("" if a is None else f"{a:.3f}" for a in acc)),
              Cell(f"{r['margin_sham']:+.4f} {r['margin_sham_ci']}", r["margin_sham"]) if r["pairs_vs_sham"] else Cell(""),
              Cell(r["margin_random"] + (f" ({r['random_kind']})" if r["random_kind"] else "")),
              Cell(r["margin_observer"]), cell(r["chance"], "{:.3f}"), Cell(r["parse"]),
              Cell(r["unscorable_pairs"]),
              Cell(f"{r['eq17_literal']} / {r['eq17_decision']}"))
    return t


def _model_claims_table(result: dict) -> LeaderTable:
    """The model-level D.5 lines (domain/object structure, decay counts), one row per model identity."""
    t = LeaderTable(slug="owmi-model-claims", title="Model-level claims (Appendix D.5), one row per model weights "
                    "and precision", columns=["model", "domain/object structure", "temporal decay"])
    for m in result.get("model_claims", []):
        t.add(m["label"], m["structure"], m["decay"])
    return t


def _decay_table(result: dict) -> LeaderTable:
    """Eq. 19 track contrasts (primary A - B_delayed, B_delayed - C; labelled secondary rows) and the D.5 verdict."""
    d = result.get("decay") or {}
    t = LeaderTable(slug="owmi-decay", title=f"Temporal decay across tracks (Eq. 19): item-paired detection-margin "
                    f"contrasts, {100 * d.get('level', 0.95):g}% item-clustered bootstrap ({d.get('n_boot')} "
                    f"replicates, seed {d.get('seed')})", columns=["model", "cell", "contrast", "role", "items paired",
                    "d' difference", "AUROC difference", "positive", "cell verdict"])
    from tamperbench.owmi.score import identity

    who = identity.result_labels(result)
    for c in d.get("cells", []):
        k = c["cell"]
        label = f"{k['benchmark']} · {k['site']} · {k['operator']}@{k['dose']:g} · {k['hook_scope']}"
        for r in c["contrasts"]:
            est = [(r[s]["diff"], r[s]["ci"]) if r.get(s) else (None, None) for s in ("dprime", "auroc")]
            t.add(who[identity.of(k)], label, r["contrast"], r["role"], cell(r.get("items_paired")),
                  _ci_cell(*est[0]) if r["estimable"] else Cell(f"not estimable: {r['reason']}"), _ci_cell(*est[1]),
                  cell(r.get("positive")), c["verdict"]["level"].replace("_", " "))
    return t


def _report_rates(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """'yes' rate per condition; per condition and read-out where the runs hold several (never pooled)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    several = len({r.get("readout") or "generated" for r in rows}) > 1
    for r in rows:
        if r.get("probe_family") != "detection" or not r.get("parse_ok") or r.get("detected") is None:
            continue
        name = f"{r['condition']} [{r.get('readout') or 'generated'}]" if several else r["condition"]
        out[name][0] += bool(r["detected"])
        out[name][1] += 1
    return {c: (out[c][0], out[c][1]) for c in sorted(out, key=lambda c: (CONDITIONS.index(c.split(" [")[0])
                                                                      if c.split(" [")[0] in CONDITIONS else 99, c))}


def _plots(result: dict, rows: list[dict]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from tamperbench.stats.intervals import wilson

    figs = []
    # 1. the three channels on one chance scale
    fig, ax = plt.subplots(figsize=(7, 3.6))
    xs, labels = 0, []
    for p in result["pooled"]:
        c = p["complete"]
        if c["pairs"]:
            lo, hi = c["auroc_ci"]
            ax.errorbar([xs], [c["auroc"]], yerr=[[c["auroc"] - lo], [hi - c["auroc"]]], fmt="o", color="C0", capsize=3)
            labels.append(f"report AUROC\n{p['pool'][:28]}")
            xs += 1
    for a in result["anchors"]:
        if a["kind"] == "probe":
            for lay in a["layers"]:
                band = lay.get("null_band") or [0, 0]
                ax.errorbar([xs], [lay["accuracy"]], fmt="s", color="C1")
                ax.fill_between([xs - 0.3, xs + 0.3], 0.5 + band[0], 0.5 + band[1], color="C1", alpha=0.2)
                labels.append(f"probe acc.\nlayer {lay['read_layer']}")
                xs += 1
        elif a["kind"] == "known_positive":
            lo, hi = a["auroc"].get("ci") or [a["auroc"]["estimate"]] * 2
            ax.errorbar([xs], [a["auroc"]["estimate"]], yerr=[[a["auroc"]["estimate"] - lo], [hi - a["auroc"]["estimate"]]],
                        fmt="D", color="C2", capsize=3)
            labels.append("known-positive\nAUROC")
            xs += 1
    ax.axhline(0.5, color="#888", ls="--", lw=1)
    ax.set_xticks(range(xs), labels, fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("chance = 0.5")
    figs.append(("owmi_three_channels", "Three channels on one chance scale", fig,
                 "report AUROC (95% CI), linear-probe accuracy with its label-shuffled null band around 0.5, "
                 "known-positive AUROC"))
    # 2. raw report rates per condition
    rates = _report_rates(rows)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for i, (_cond, (k, n)) in enumerate(rates.items()):
        lo, hi = wilson(k, n)
        ax.bar(i, k / n, color="C0")
        ax.errorbar([i], [k / n], yerr=[[k / n - lo], [hi - k / n]], color="k", capsize=4)
    ax.set_xticks(range(len(rates)), [f"{c}\n(n={n})" for c, (_, n) in rates.items()], fontsize=8)
    ax.set_ylabel("'yes, something changed' rate")
    ax.set_ylim(0, 1)
    figs.append(("owmi_report_rates", "Raw report rates per condition", fig, "parsed detection probes; 95% Wilson intervals"))
    # 3. d' and AUROC per model
    pools = [p for p in result["pooled"] if p["complete"]["pairs"]]
    fig, axes = plt.subplots(1, 2, figsize=(9, 0.8 + 0.5 * max(2, len(pools))), squeeze=False)
    for ax, key in zip(axes[0], ("dprime", "auroc")):
        y = np.arange(len(pools))
        est = [p["complete"][key] for p in pools]
        ci = [p["complete"][f"{key}_ci"] for p in pools]
        ax.errorbar(est, y, xerr=[[e - c[0] for e, c in zip(est, ci)], [c[1] - e for e, c in zip(est, ci)]],
                    fmt="o", capsize=3)
        ax.axvline(0 if key == "dprime" else 0.5, color="#888", ls="--", lw=1)
        ax.set_yticks(y, [p["pool"][:40] for p in pools], fontsize=7)
        ax.set_xlabel("d'" if key == "dprime" else "AUROC")
    figs.append(("owmi_dprime_auroc", "d' and AUROC per model", fig, "item-clustered bootstrap 95% intervals"))
    return figs


def _positive_table(runs: list[RunInfo]) -> LeaderTable | None:
    """The known positive through the identical pipeline (``owmi known-positive --check``): runs whose
    spec holds an adapted model (``BASE+peft:DIR``), scored apart, adapted and unadapted side by side."""
    from tamperbench.models.adapter import MARK
    from tamperbench.owmi.score.positive import floor_lines, rows_of, verdicts
    from tamperbench.owmi.score.profile import score_runs

    mine = [r for r in runs if any(MARK in str(m) for m in r.spec.get("models", []))]
    if not mine:
        return None
    result = score_runs([r.path for r in mine], n_boot=1000)
    adapted = next(str(m) for r in mine for m in r.spec["models"] if MARK in str(m))
    rows = rows_of(result, adapted)
    v = verdicts(rows)
    table = LeaderTable(slug="owmi-known-positive", title="Known positive through the identical pipeline: a LoRA "
                        "trained to report replace-at-positions-0-2, run by owmi run beside its base on held-out "
                        "directions (Section 7.2)",
                        columns=["model", "read-out", "pairs (items)", "hits", "false alarms", "AUROC [95% CI]",
                                 "d' [95% CI]", "margin over sham [95% CI, item-clustered]"],
                        note=" ".join([*floor_lines(v), *(d["line"] for d in v.values())]))
    for r in rows:
        n = r["pairs"]
        table.add(Cell(f"{r['role']}: {r['model']}"), Cell(r["readout"]), Cell(f"{n} ({r['items']})"),
                  Cell(f"{r['hits']}/{n}"), Cell(f"{r['false_alarms']}/{n}"),
                  _ci_cell(r["auroc"] if n else None, r["auroc_ci"]), _ci_cell(r["dprime"] if n else None, r["dprime_ci"]),
                  _ci_cell(r["margin"] if n else None, r["margin_ci"]))
    return table


def build_section(runs: list[RunInfo], writer) -> Section:
    from tamperbench.owmi.score.profile import score_runs
    from tamperbench.owmi.score.score import load_runs

    paths = [r.path for r in runs]
    result = score_runs(paths, n_boot=1000)
    rows, _, _ = load_runs(paths)
    section = Section(suite="owmi", title="Open-Weight Masked Introspection", tables=_tables(result))
    positive = _positive_table(runs)
    if positive is not None:
        section.tables.insert(0, positive)
    if result["excluded_runs"]:
        section.notes.append(f"{len(result['excluded_runs'])} records left out of analysis: a field Appendix D "
                             "requires was not recorded")
    from tamperbench.owmi.score.fmt import READOUTS

    for name in result.get("readouts", []):  # how the reports were read (a verbal and a token-level read-out never pool)
        if name != "generated" or len(result["readouts"]) > 1:
            section.notes.append(f"read-out {name}: {READOUTS.get(name, 'unknown read-out')}")
    note = result.get("all_models_pool") or {}
    if len(note.get("precisions", [])) > 1:
        section.notes.append(f"no all-models pool spans every run: {note['reason']}")
    from tamperbench.owmi.score.site_forest import forest_figures

    for stem, title, fig, caption in forest_figures(result, _positive_rows(runs)) + _plots(result, rows):
        section.plots.append(Plot(title, writer.figure(fig, stem), caption))
    return section


def _positive_rows(runs: list[RunInfo]) -> list[dict]:
    """The known-positive check's rows (adapted and unadapted) for the forest plots; empty without one."""
    from tamperbench.models.adapter import MARK
    from tamperbench.owmi.score.positive import rows_of
    from tamperbench.owmi.score.profile import score_runs

    mine = [r for r in runs if any(MARK in str(m) for m in r.spec.get("models", []))]
    if not mine:
        return []
    adapted = next(str(m) for r in mine for m in r.spec["models"] if MARK in str(m))
    return rows_of(score_runs([r.path for r in mine], n_boot=1000), adapted)
