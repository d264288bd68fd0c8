"""Sleight of Word's part of the report site: leaderboard, figures and the lazy trial viewer.

The tables are the suite's own Tables 1 to 3, computed from the records at build time (never pasted
from a saved ``tables.md``), one row per model across every run given. The trial viewer gets one data
script per question (see :mod:`tamperbench.report.site.writer` for why scripts), so a 10,100-trial run
opens as fast as a 10-trial one.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from tamperbench.report.site.model import Plot, RunInfo, Section
from tamperbench.report.site.tables import Cell, LeaderTable
from tamperbench.sleight import site_plots
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE, full_trace

_NUM = re.compile(r"^[+-]?\d+(?:\.\d+)?")
LABELS = ("flagged", "corrected", "derailed", "aware")


def _cell(text: str) -> Cell:
    m = _NUM.match(text.strip())
    return Cell(text, float(m.group()) if m else (text or None))


def _leaderboard(summaries: list[dict]) -> list[LeaderTable]:
    from tamperbench.sleight import tables as suite_tables

    out = []
    for name in ("table1", "table1b", "table2", "table3"):
        fn = getattr(suite_tables, name, None)
        if fn is None:
            continue
        head, rows = fn(summaries)
        t = LeaderTable(slug=f"sleight-{name}", title=suite_tables.TITLES.get(name, name), columns=list(head))
        for r in rows:
            t.add(*[_cell(str(c)) for c in r])
        out.append(t)
    return out


def _tokenizer_for(prov: dict):
    """The run's tokenizer from its recorded local path, for per-token colouring; None when gone.

    A path that is no longer a directory is None before transformers' tokenizer machinery is imported
    (~0.4 s) and before ``from_pretrained`` could read the string as a hub repository id."""
    path = prov.get("resolved_path")
    if not path or not Path(path).is_dir():
        return None
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(prov["resolved_path"])
    except Exception:  # noqa: BLE001 - a copied run without its model still gets a viewer, as plain text
        return None


def _pieces(tok, ids: list[int]) -> list[str] | None:
    return None if tok is None else tok.batch_decode([[i] for i in ids])


def _votes(store) -> dict[str, list[dict]]:
    if not store.has_table("judge_votes"):
        return {}
    out: dict[str, list[dict]] = defaultdict(list)
    for v in store.rows("judge_votes"):
        out[v["trial_key"]].append({"judge": v["judge"], "status": v["status"],
                                    **{lab: v.get(lab) for lab in LABELS}, "rationale": v.get("rationale") or ""})
    return out


def _verdicts(store) -> dict[str, dict]:
    if not store.has_table("judge_verdicts"):
        return {}
    return {v["trial_key"]: {lab: v.get(lab) for lab in (*LABELS, "ignored")} for v in store.rows("judge_verdicts")}


def _rounded(xs) -> list[float]:
    return [round(float(x), 3) for x in xs]


def write_viewer(run: RunInfo, writer) -> tuple[str, dict]:
    """One data script per question plus an index script; returns (viewer page, profile traces)."""
    from tamperbench.store import RunStore

    base = f"data/sleight-{run.index}"
    traces: list = []
    with RunStore.open_existing(run.path, read_only=True) as store:
        clean = {c["key"]: c for c in store.rows(CLEAN_TABLE)}
        trials = store.rows(TRIALS_TABLE)
        votes, verdicts = _votes(store), _verdicts(store)
    provs = {p.get("id"): p for p in run.provenance}
    toks: dict = {}
    by_q: dict[str, list[dict]] = defaultdict(list)
    for t in trials:
        by_q[t["question_id"]].append(t)
    index: dict[str, Any] = {"run": str(run.path), "questions": [], "words": sorted({t["substitution"] for t in trials}),
             "trials": []}
    for qi, (qid, group) in enumerate(sorted(by_q.items())):
        pid = group[0]["provenance_id"]
        if pid not in toks:
            toks[pid] = _tokenizer_for(provs.get(pid, {}))
        tok = toks[pid]
        c = clean.get(group[0]["clean_key"])
        chunk: dict[str, Any] = {"question": group[0]["question"], "clean": None, "trials": []}
        if c is not None:
            chunk["clean"] = {"text": c["text"], "pieces": _pieces(tok, c["token_ids"]),
                              "surprisal": _rounded(c["surprisal"])}
        for t in sorted(group, key=lambda r: r["substitution"]):
            row = {"key": t["key"], "word": t["substitution"], "entity": t["entity"], "swaps": t["swap_count"],
                   "text": t["reaction_text"], "verdict": verdicts.get(t["key"]), "votes": votes.get(t["key"], []),
                   "pieces": None, "surprisal": None, "injected": []}
            if c is not None:
                tr = full_trace(c, t)
                row.update(pieces=_pieces(tok, tr.token_ids), surprisal=_rounded(tr.surprisal),
                           injected=[i for i, f in enumerate(tr.injected) if f])
                if not t["untouched"]:
                    traces.append((tr, list(t["swap_positions"])))
            chunk["trials"].append(row)
            v = verdicts.get(t["key"]) or {}
            index["trials"].append([qi, index["words"].index(t["substitution"]),
                                    "".join("1" if v.get(lab) else ("0" if v.get(lab) is False else "?")
                                            for lab in (*LABELS, "ignored"))])
        src = writer.data_script(f"{base}/q{qi:05d}.js", f"q{qi}", chunk)
        index["questions"].append({"id": qid, "text": group[0]["question"], "chunk": src, "n": len(group)})
    writer.data_script(f"{base}/index.js", "index", index)
    page = f"viewer/sleight-{run.index}.html"
    writer.render("viewer.html.j2", page, title=f"Sleight of Word trials: {run.label}", run=run,
                  index_src=f"{base}/index.js", labels=[*LABELS, "ignored"])
    return page, {"traces": traces, "clean": list(clean.values())}


def build_section(runs: list[RunInfo], writer) -> Section:
    from tamperbench.sleight.summary import summarize
    from tamperbench.store import RunStore

    summaries: list[dict] = []
    for run in runs:
        with RunStore.open_existing(run.path, read_only=True) as store:
            summaries += summarize(store, window=int(run.spec.get("window", 8)))
    section = Section(suite="sleight", title="Sleight of Word", tables=_leaderboard(summaries))
    all_traces, clean_rows = [], []
    for run in runs:
        page, data = write_viewer(run, writer)
        all_traces += data["traces"]
        clean_rows += data["clean"]
        section.pages.append({"title": f"Trial viewer: {run.label}", "href": page,
                              "note": f"{run.counts.get(TRIALS_TABLE, 0)} trials"})
    if summaries:
        section.plots.append(Plot("Δ surprisal and Δ entropy per model",
                                  writer.figure(site_plots.plot_deltas(summaries), "sleight_deltas"),
                                  "mean over touched trials' Deltas, 95% bootstrap interval over questions"))
    if summaries:
        section.plots.append(Plot("Flagged and derailed: entity phrase vs substituted words",
                                  writer.figure(site_plots.plot_entity_vs_words(summaries), "sleight_entity_vs_words"),
                                  "jury majority labels, each bar with its n; 'not judged' before judging"))
    if all_traces:
        profiles = {s: site_plots.swap_profile(all_traces, s) for s in site_plots.SIGNALS}
        means = {s: (sum(sum(c[s]) for c in clean_rows) / max(1, sum(len(c[s]) for c in clean_rows)))
                 for s in site_plots.SIGNALS}
        section.plots.append(Plot("Signal aligned at the swap",
                                  writer.figure(site_plots.plot_profiles(profiles, means), "sleight_swap_aligned"),
                                  f"{len(all_traces)} tampered replies; 95% bands; dashed: clean answers' mean"))
    return section
