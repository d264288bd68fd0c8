"""Format ``docs/results.md`` and its figures from the data ``tools/results.py`` collected (``results.json``).

Nothing here computes a number: every cell is a string or value the suites' own table code produced
(``sleight.tables``, ``quote.tables``, ``owmi.score.tables``, ``owmi score``); this module lays them out, draws
them with matplotlib and says what produced them. ``tests/unit/tools/test_results_page.py`` checks that
every number on the page is one of those values.
"""

from __future__ import annotations

from pathlib import Path

from tamperbench.safeio.markdown import markdown_table


def _compare():
    import importlib.util
    import sys

    if "results_page_compare" not in sys.modules:
        spec = importlib.util.spec_from_file_location("results_page_compare",
                                                      Path(__file__).with_name("results_page_compare.py"))
        assert spec and spec.loader
        sys.modules["results_page_compare"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["results_page_compare"])
    return sys.modules["results_page_compare"]

MAKE = {"cpu-small": "make results RESULTS=cpu-small", "paper": "make results"}
SLEIGHT_TABLES = ("table1", "table1b", "table2", "table3")
SIZE_TEXT = {
    "cpu-small": "the **small size** (`make results RESULTS=cpu-small`): Sleight of Word `quick` and Exact Words "
                 "`standard` (greedy, one repeat) on every installable model, OWMI `quick` and the known-positive "
                 "anchor's `test` preset with its check. These are smoke-scale presets, not the papers': read the "
                 "intervals, not the point estimates. The full page (Sleight of Word `--preset paper`, Exact Words "
                 "with repeats and sampling, the known-positive `full` preset) is produced by `make results`",
    "paper": "the **full size** (`make results`): Sleight of Word `--preset paper` (100 questions x 101 "
             "substitutions = 10,100 trials a model) on both installable models, scored by the rule-based evidence "
             "detector (no judge: no real judge model can run on this machine); Exact Words `standard` with "
             "`--sampling paper` and repeats, both arms, both models; OWMI's `standard` preset (every built-in item) "
             "under the `choice` and `constrained` read-outs with `owmi score`'s claims; and the known-positive "
             "anchor's `full` preset (the paper's 100 + 100 held-out pairs) through `owmi run`. The papers' own "
             "numbers stand beside ours in one table per suite. A run still being written is shown with its count "
             "and marked in progress, never as complete",
}


def _header(data: dict) -> list[str]:
    m = data["machine"]
    commit = m["commit"] + ("` (with uncommitted changes in src/ or tools/)" if m["dirty"] else "`")
    lines = ["# Results", "",
             "Numbers from real runs, regenerated from the run directories by one command; nothing on this page is "
             "typed by hand. Each table is printed by the suite's own table code, with its n, its parse rate where "
             "it has one and its controls; how to read them is on the suite's page "
             "([Sleight of Word](sleight.md), [Exact Words](quote.md), [OWMI](owmi.md)).", "",
             f"This page was produced by {SIZE_TEXT[data['size']]}.", "",
             f"- **Date**: {m['date']}",
             f"- **Command**: `{m['command']}` (" + ("the page rebuilt from the stored runs of "
                                                     if "--page-only" in m["command"] else "what ")
             + f"`{MAKE[data['size']]}`" + ("" if "--page-only" in m["command"] else " runs") + ")",
             f"- **tamperbench**: {m['tamperbench']}, commit `{commit}",
             f"- **Machine**: {m['platform']}, {m['cpus']} CPUs"
             + (f" ({m['cpu_model']}), {m['memory_gib']} GiB memory" if m.get("cpu_model") else "")
             + f"; torch {m['torch']} with {m['torch_threads']} thread(s); Python {m['python']}", "", "??? note \"The steps it ran (each resumes its run directory under runs/results/)\"", ""]
    lines += [f"    - `{s}`" for s in data["steps"]] + [""]
    lines += [f"- {n}" for n in data["notes"]] + ([""] if data["notes"] else [])  # the tool's own notes
    return lines


def _sleight(s: dict | None, figures: dict[str, str], data: dict | None = None) -> list[str]:
    out = ["## Sleight of Word", ""]
    if s is None:
        return out + ["Not run yet.", ""]
    status = s.get("status") or {}
    if status:
        out += ["Runs and their state (trials stored of the preset's questions x substitutions; distinct trial keys):",
                ""] + [f"- `{Path(r).name}`: {_compare().trials_cell(st)}"
                       + (f"; {st['distinct_keys']:,} distinct keys" if st["trials"] else "") for r, st in status.items()]
        out += [""]
    if not s.get("tables"):
        return out + ["No trial stored yet.", ""]
    judged = data is None or data["size"] != "paper"
    out += [f"Run(s): {', '.join(f'`{Path(r).name}`' for r in s['runs'])}; trigger word(s) "
            f"{', '.join(f'`{t}`' for t in s['spec']['triggers'] or [])}; budget {s['spec']['max_new_tokens']} tokens; "
            + ("judged by the embedded model as the only juror (its parse rate is under the tables)" if judged else
               f"not judged: the judge columns stay empty because {_compare().NO_JUDGE}; the rule-based evidence "
               "detector's columns are in the comparison table below")
            + ". Control for the Δ columns: the clean answer's own surprisal (reference rule) and the unaltered "
            "branch at the same position (paired Δ).", ""]
    out += [f"- {n}" for n in s.get("provenance_notes") or []] + ([""] if s.get("provenance_notes") else [])
    for name in SLEIGHT_TABLES:
        t = s["tables"][name]
        out += [markdown_table(t["columns"], t["rows"], s["titles"][name]), ""]
    out += [f"- {n}" for n in s["notes"]] + [""]  # sleight.tables' notes, as its tables.md prints them
    if "sleight" in figures:
        out += [f"![Sleight of Word: post-swap rise per model]({figures['sleight']})", ""]
    if data is not None and data.get("papers"):
        out += _compare().sleight_compare(data)
    return out


def _quote(q: dict | None, figures: dict[str, str], data: dict | None = None) -> list[str]:
    out = ["## Exact Words", ""]
    if data is not None and data.get("papers"):
        out += _compare().quote_compare(data)
    if q is None:
        return out + ["Not run yet.", ""]
    if q.get("states"):
        out += ["Runs and their state (trials stored of items x arms x repeats):", ""]
        out += [f"- `{Path(r).name}`: {_compare().trials_cell(st)}" for r, st in q["states"].items()] + [""]
    out += ["Faithful = byte-identical copy (deterministic scorer, no parsing: every reply is scored). Controls: the "
            "clean items beside the dirty ones (a planted error to keep), the plain arm beside the strict one, and the "
            "scorer on answers of known class below.", ""]
    out += _quote_controls(q.get("controls") or {})
    body = q["markdown"].split("\n", 1)[1] if q["markdown"].startswith("# ") else q["markdown"]
    body = body.split("\n## Hardest items")[0]  # the per-item list is in the run's quote_table.md
    out += [body.replace("\n## ", "\n### ").strip(), ""]  # quote.tables.to_markdown, headings one level down
    if "quote" in figures:
        out += [f"![Exact Words: faithful rate per model and arm]({figures['quote']})", ""]
    return out


def _quote_controls(controls: dict) -> list[str]:
    """The scorer on the same items answered by reference answerers (``quote.controls``): can it say faithful,
    corrected, truncated and wrong span at all? A miss is printed as a miss."""
    from tamperbench.quote.controls import EXPECTED
    from tamperbench.safeio.markdown import markdown_table

    order = list(EXPECTED)
    out = []
    for preset, rows in controls.items():
        body = [[name, f"{r['expected']} / {r['expected_paper']}", f"{r['n']:,}", f"{r['hits']:,} of {r['n']:,}",
                 f"{r['hits_paper']:,} of {r['n']:,}",
                 ", ".join(f"{k} {v:,}" for k, v in sorted(r["ours"].items()) if k != r["expected"]) or "none"]
                for name, r in sorted(rows.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))]
        out += [markdown_table(["Answerer", "Its class (ours / paper)", "Answers", "In its class (ours)",
                                "In its class (paper)", "Elsewhere (ours)"], body,
                               f"Scorer controls: preset `{preset}` answered by reference answerers"), "",
                "Built from each item, not by a model (`tamperbench.quote.controls`): the copier answers the gold "
                "sentence, the corrector the gold with its planted error repaired (dirty items), the truncator the "
                "gold's first half, the neighbour the gold and the sentence after it as the document runs on. Each "
                "goes through the scorer as a model's answer does.", ""]
    return out


def _num(x, d: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{d}f}"


def _owmi(o: dict | None, figures: dict[str, str], data: dict | None = None) -> list[str]:
    out = ["## OWMI", ""]
    if data is not None and data.get("papers"):
        out += _compare().owmi_compare(data)
    if o is None:
        return out + ["Not run yet.", ""]
    for run in o["runs"]:
        spec = run["spec"]
        state = (f" ({run['records']:,} records stored, {run['state']})" if run.get("state") == "run in progress"
                 else f" ({run['records']:,} records)" if "records" in run else "")
        out += [f"Run `{Path(run['run']).name}`{state} (its command is in the steps above), read-out "
                f"{spec.get('readout') or 'generated (free text, parsed)'}. Controls in the same run: sham (a zero-norm intervention), "
                "random (a random direction of matched impact) and observer tiers (a second pass that sees the "
                "output, not the intervention). The yes-rate is descriptive; detection is the paired contrast "
                "that `owmi score` prints below.", ""]
        rows = [[c["track"], c["hook_scope"], f"{c['condition']} [{c['tier']}]" if c["condition"] == "observer"
                 else c["condition"], c["runs"], c["paired"], f"{c['parsed']}/{c['runs']}", _num(c["yes_rate"]),
                 _num(c["rubric_rate"]), _num(c["js"], 4)] for c in run["conditions"]]
        out += [markdown_table(["track", "scope", "condition", "runs", "paired w/ intervention", "parsed",
                                "yes-rate (descr.)", "C rubric flag", "mean JS"], rows,
                               "Runs per track, scope and condition (parse rate: parsed/runs)"), ""]
        conds = run["conditions"]
        if conds and all(c["parsed"] == 0 for c in conds):
            out += ["**No report parsed in this run: every yes-rate above is n/a, not zero.**", ""]
        elif any(c["parsed"] == 0 for c in conds):
            some = [f"{c['track']}/{c['hook_scope']} {c['condition']}" + (f" [{c['tier']}]" if c["tier"] else "")
                    for c in conds if c["parsed"]]
            out += ["**Rows whose parsed column reads 0/n hold no parsed report: their yes-rate is n/a, not zero.** "
                    "Only these rows parsed any report: " + ", ".join(some) + ".", ""]
    if "owmi" in figures:
        out += [f"![OWMI: yes-rate per condition]({figures['owmi']})", ""]
    forests = sorted(k for k in figures if k.startswith("owmi_forest_"))
    if forests:
        out += ["### Forest plots: detection per cell", "",
                "Per model, each detection cell's AUROC and margin over paired sham with their 95% item-clustered "
                "intervals; the marker's colour and L-number are the cell's claim level (the tables below hold the "
                "same numbers).", ""]
        out += [f"![OWMI forest plot {k.rsplit('_', 1)[1]}]({figures[k]})" for k in forests] + [""]
    if o.get("positive_check_md"):
        out += ["### Known-positive check: the adapted model through `owmi run` beside its base", "",
                "As `owmi known-positive --check` wrote it (`known_positive_check.md` in the anchor directory): the "
                "instrument must see the effect the fine-tune put there, and no effect in the unadapted base.", "",
                o["positive_check_md"].strip(), ""]
    else:
        out += ["The known-positive check (`owmi known-positive --check`) has not been run on these runs.", ""]
    if o.get("score_md"):
        out += ["### `owmi score`: detection against the controls and the known-positive anchor", "",
                "Sections of the run's `owmi_score.md` (the full file, with dose, variance, decay and closed-set "
                "sections, is in the score directory).", "", *_score_sections(o["score_md"]), ""]
    else:
        out += ["`owmi score` has not been run on these runs yet.", ""]
    return out


SCORE_SECTIONS = ("Reportability profile", "Detection against paired sham", "Sensitivity anchors", "Claim verdicts")


def _score_sections(md: str) -> list[str]:
    """The ``SCORE_SECTIONS`` of owmi score's Markdown, headings two levels down, as it printed them."""
    parts = md.split("\n## ")
    out = [parts[0].split("\n", 1)[1].strip()] if "\n" in parts[0] else []  # the Runs line under "# OWMI score"
    for part in parts[1:]:
        if part.startswith(SCORE_SECTIONS):
            if part.startswith("Claim verdicts"):  # the verdict lines; their held/failed lists stay in the file
                part = "\n".join(line for line in part.splitlines() if not line.startswith("  - "))
            out += ["#### " + part.replace("\n### ", "\n##### ").strip(), ""]
    return out


def render(data: dict, figures: dict[str, str]) -> str:
    lines = _header(data) + _sleight(data["sleight"], figures, data) + _quote(data["quote"], figures, data) + \
        _owmi(data["owmi"], figures, data) + (_compare().scale_section(data, figures) if "scale" in data else [])
    return "\n".join(lines).rstrip() + "\n"


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})  # no timestamp: the same runs give the same file
    plt.close(fig)


def _bars(ax, labels: list[str], series: dict[str, list[tuple]], ylabel: str) -> None:
    """Grouped bars with interval whiskers; each value is (point, lo, hi), None where missing."""
    import numpy as np

    width = 0.8 / max(len(series), 1)
    x = np.arange(len(labels))
    for i, (name, vals) in enumerate(series.items()):
        pts = [np.nan if v is None or v[0] is None else v[0] for v in vals]
        err = [[0 if v is None or v[1] is None else v[0] - v[1] for v in vals],
               [0 if v is None or v[2] is None else v[2] - v[0] for v in vals]]
        ax.bar(x + i * width - 0.4 + width / 2, pts, width, yerr=err, capsize=3, label=name)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)


def existing(fig_dir: Path) -> dict[str, str]:
    """The figures already in ``fig_dir`` (what ``figures`` returned when it drew them)."""
    return {f.stem: f"results/{f.name}" for f in sorted(fig_dir.glob("*.svg"))}


def figures(data: dict, out: Path, fmt: str = "svg") -> dict[str, str]:
    """Figures of the main tables (SVG for the page); returns {section: path relative to docs/}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "tamperbench-results"
    made: dict[str, str] = {}
    est = lambda e: None if not e or e.get("mean") is None else (e["mean"], e.get("lo"), e.get("hi"))  # noqa: E731
    s = data.get("sleight")
    if s and s.get("models"):
        fig, ax = plt.subplots(figsize=(6, 3.2))
        models = s["models"]
        names = [m["model"] for m in models]  # a run resumed under another provenance has a row per provenance
        _bars(ax, [n + (f"\n{m['provenance_id'][:8]}" if names.count(n) > 1 else "") for n, m in zip(names, models)], {
            "Δ surprisal (reference rule)": [est(m["delta_surprisal"]) for m in models],
            "paired Δ surprisal (vs unaltered branch)": [est(m["paired_surprisal"]) for m in models],
            "Δ entropy top-20": [est(m["delta_entropy_top20"]) for m in models]}, "nats (95% bootstrap CI)")
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_title("Sleight of Word: post-swap rise", fontsize=9)
        _save(fig, out / f"sleight.{fmt}")
        made["sleight"] = f"results/sleight.{fmt}"
    q = data.get("quote")
    q = q and q["summary"]
    if q and q["rates"]:
        fig, ax = plt.subplots(figsize=(6, 3.2))
        models = sorted({r["model"].split(" [")[0] for r in q["rates"]})
        arms = sorted({r["arm"] for r in q["rates"]})
        cell = {(r["model"].split(" [")[0], r["arm"]): r for r in q["rates"]}
        _bars(ax, models, {arm: [None if (m, arm) not in cell else
                                 (cell[m, arm]["faithful_rate"], *cell[m, arm]["ci95"]) for m in models]
                           for arm in arms}, "faithful rate (95% Wilson CI)")
        ax.set_ylim(0, 1)
        ax.set_title("Exact Words: byte-identical copies", fontsize=9)
        _save(fig, out / f"quote.{fmt}")
        made["quote"] = f"results/quote.{fmt}"
    o = data.get("owmi")
    if o and o["runs"]:
        conds = o["runs"][0]["conditions"]
        fig, ax = plt.subplots(figsize=(6.5, 0.8 + 0.22 * len(conds)))
        y = list(range(len(conds)))[::-1]
        ax.barh(y, [float("nan") if c["yes_rate"] is None else c["yes_rate"] for c in conds], color="tab:blue")
        ax.set_yticks(y, [f"{c['track']}/{c['hook_scope']} {c['condition']}" + (f" [{c['tier']}]" if c["tier"] else "")
                          for c in conds], fontsize=7)
        for yi, c in zip(y, conds):
            ax.annotate(f"parsed {c['parsed']}/{c['runs']}", (1.01, yi), xycoords=("axes fraction", "data"),
                        fontsize=6, va="center")
        ax.set_xlim(0, 1)
        ax.set_xlabel("yes-rate among parsed reports (descriptive; no bar: none parsed)", fontsize=8)
        ax.set_title("OWMI: reports per track, scope and condition", fontsize=9)
        _save(fig, out / f"owmi.{fmt}")
        made["owmi"] = f"results/owmi.{fmt}"
    made.update(_compare().rss_figures(data, out, fmt, _save))
    if o and o.get("forest"):
        from tamperbench.owmi.score.site_forest import forest_figure

        for i, (model, rows) in enumerate(sorted(o["forest"].items())):
            _save(forest_figure(model, rows, []), out / f"owmi_forest_{i}.{fmt}")
            made[f"owmi_forest_{i}"] = f"results/owmi_forest_{i}.{fmt}"
    return made
