"""The results page's comparison tables (the papers' numbers beside ours) and its scale section.

Formatting only, as ``results_page.py``: every number is a value of ``results.json`` (the runs, as the
suites' own code read them, or the papers' numbers in ``tools/results_papers.py``, cited in a source column).
"""

from __future__ import annotations

from pathlib import Path

from tamperbench.safeio.markdown import markdown_table

NO_JUDGE = "no real judge model can run on this machine"


def ours(data: dict, runs: list[str] | None = None) -> str:
    """Where one of our rows comes from: when its runs' records were stored (first to last ``created_at``, from the
    scale evidence; each process's commit is in the settings table), and the commit that built the page. A row
    whose runs hold no records says the page's date."""
    m = data["machine"]
    spans = [(e["records"].get("first"), e["records"].get("last")) for e in data.get("scale") or []
             if e.get("records") and any(_within(e["run"], r) for r in runs or [])]
    spans = [(a, b) for a, b in spans if a and b]
    if not spans:
        return f"tamperbench, measured, {m['date']}, commit {m['commit'][:10]}"
    first, last = min(a for a, _ in spans)[:16], max(b for _, b in spans)[:16]
    when = first if first == last else f"{first} to {last[11:] if first[:10] == last[:10] else last}"
    return f"tamperbench, measured {when} UTC (its stored records), page built at commit {m['commit'][:10]}"


def _within(run: str, top: str) -> bool:
    """``run`` is ``top`` or a run inside it (the known positive's check runs)."""
    a, b = Path(run).parts, Path(top).parts
    return a[: len(b)] == b


def _runs_named(data: dict, prefix: str, model: str | None = None) -> list[str]:
    """The runs of the scale evidence whose directory starts with ``prefix`` (and ends with ``-model``)."""
    out = []
    for e in data.get("scale") or []:
        run = Path(e["run"])
        top = run.name if run.name.startswith(prefix) else run.parent.name  # a check's run-choice: its anchor
        if top.startswith(prefix) and (model is None or top.endswith("-" + model)):
            out.append(e["run"])
    return out


def _pct(k: int | None, rate: float | None, d: int = 1) -> str:
    return "n/a" if rate is None else f"{100 * rate:.{d}f} ({k})"


def trials_cell(st: dict) -> str:
    exp = st.get("expected")
    if st["state"] == "not started":
        return "not started"
    count = f"{st['trials']:,} of {exp:,}" if exp else f"{st['trials']:,}"
    return count + ("" if st["state"] == "complete" else f", {st['state']}")


def sleight_compare(data: dict) -> list[str]:
    s, papers = data.get("sleight"), data["papers"]
    head = ["Model", "Source", "Trials", *papers["SLEIGHT_COLUMNS"], "Evidence: flagged % (n)", "Evidence: aware % (n)"]
    rows = [[m, "paper, its models (Table 1)", "10,100", *vals, "", ""]
            for m, *vals in papers["SLEIGHT_TABLE1"]]
    status = (s or {}).get("status", {})
    models = (s or {}).get("models") or []
    t1 = ((s or {}).get("tables") or {}).get("table1") or {"rows": []}
    run_of = {m["provenance_id"]: r for r, ms in (s or {}).get("run_models", {}).items() for m in ms}
    names = [m["model"] for m in models]
    for m, row in zip(models, t1["rows"]):
        run = run_of.get(m["provenance_id"])
        st = status.get(run, {"state": "not started"})
        ev = (s or {}).get("evidence", {}).get(run)
        label = m["model"] + (f" (provenance {m['provenance_id']}: {m['trials']:,} trials)" if names.count(m["model"]) > 1
                              else "")
        rows.append([label, ours(data, [run] if run else []),
                     trials_cell(st) if st["state"] != "complete" else f"{st['trials']:,}",
                     *[f"— ({NO_JUDGE})" if i == 0 else "—" for i in range(6)], row[7], row[8],
                     _pct(ev["flagged"], ev["flagged_rate"]) if ev else "", _pct(ev["aware"], ev["aware_rate"]) if ev
                     else ""])
    for run, st in status.items():
        if st["state"] == "not started":
            rows.append([Path(run).name.removeprefix("sleight-paper-"), ours(data), "not started", *["—"] * 8, "", ""])
    return ["### Beside the paper: Table 1", "", papers["INSTRUMENTS"], "",
            f"Paper rows: {papers['SLEIGHT_CITE']}. Our rows: the judge columns are empty because {NO_JUDGE} (the "
            "paper's jury is three 26B-70B models; a 135M judge's labels would not be the same measurement); the Δ "
            "columns are Table 1's below (reference rule, 95% bootstrap CI); the evidence columns are the rule-based "
            "evidence detector (`tamperbench judge evidence RUN`: the reference's cue list and rule; the paper prints "
            "no such column), as a share of the judgeable (touched) trials.", "",
            markdown_table(head, rows, "Sleight of Word: the paper's Table 1 and our runs"), ""]


def quote_compare(data: dict) -> list[str]:
    q, papers = data.get("quote"), data["papers"]
    classes = ["faithful", "corrected", "truncated", "wrong_span", "rewritten"]
    head = ["Model", "Source", "Quotes", "Faithful % (n)", *[c.replace("_", " ") for c in classes[1:]]]
    pooled = papers["QUOTE_POOLED"]
    rows = [[m, "paper, its models (Finding 4)", "74", rate, "", "", "", ""]
            for m, rate in papers["QUOTE_MODELS"]]
    rows.append(["all 13 models", "paper, its models", pooled["n"], f"{pooled['faithful']} of {pooled['n']}",
                 *[pooled[c] for c in classes[1:]]])
    for model, pm in sorted(((q or {}).get("per_model_paper") or {}).items()):
        p = pm["pooled"] or {}
        rows.append([model, ours(data, _runs_named(data, "quote-", model.split()[0])), f"{pm['n']:,}",
                     _pct(p.get("faithful"), p.get("faithful_rate")),
                     *[str(pm["counts"].get(c, 0)) for c in classes[1:]]])
    arms = [[arm, "paper, its models", "", rate] for arm, rate in papers["QUOTE_ARMS"].items()]
    arms += [[r["arm"], ours(data, _runs_named(data, "quote-")), f"{r['n']:,}", _pct(r["faithful"], r["faithful_rate"])]
             for r in ((q or {}).get("summary") or {}).get("pooled_by_arm", [])]
    return ["### Beside the paper: faithful rates and failure classes", "", papers["INSTRUMENTS"], "",
            f"Paper rows: {papers['QUOTE_CITE']} (the per-model class counts are not in its text; its rates are over "
            "both arms). Our rows: the paper's taxonomy (`summarise(..., taxonomy=\"paper\")`: faithful, corrected, "
            "truncated, wrong span, rewritten) over both arms and every repeat.", "",
            markdown_table(head, rows, "Exact Words: faithful rate per model and the failure classes"), "",
            markdown_table(["Arm", "Source", "Quotes", "Faithful % (n)"], arms, "Faithful rate per arm"), ""]


def _no_bound(p: dict) -> str:
    """Why a pool has no equivalence bound: the reason ``owmi score`` recorded beside it (``no_bound_reason``)."""
    if p.get("no_bound_reason"):
        return f"no bound: {p['no_bound_reason']}"
    return "no bound (this owmi_score.json records no reason: rerun `owmi score` on these runs)"


def owmi_compare(data: dict) -> list[str]:
    o, papers = data.get("owmi") or {}, data["papers"]
    pp, kp = papers["OWMI_POOLED"], papers["OWMI_KNOWN_POSITIVE"]
    ci = lambda x: "" if not x else f" [{x[0]:.3f}, {x[1]:.3f}]"  # noqa: E731
    rows = [["pooled dose battery", "paper, its models", pp["pairs"], pp["dprime"], pp["auroc"], pp["equivalence"]]]
    for p in o.get("pooled") or []:
        eq = "; ".join(f"below {100 * e['bound']:.3f} pp at alpha {e['alpha']:g}" for e in p["equivalence"] or [])
        runs = _runs_named(data, "owmi-", str(p["pool"]).split()[0]) or _runs_named(data, "owmi-")  # "all models"
        rows.append([p["pool"], ours(data, runs), str(p["pairs"]),
                     "n/a" if p["dprime"] is None else f"{p['dprime']:.3f}{ci(p['dprime_ci'])}",
                     "n/a" if p["auroc"] is None else f"{p['auroc']:.3f}{ci(p['auroc_ci'])}",
                     eq or _no_bound(p)])
    if not o.get("pooled"):
        rows.append(["pooled", ours(data), "", "", "", "owmi score has not run on these runs yet"])
    krows = [["known positive (LoRA, Qwen2.5-7B-Instruct)", "paper, its models", kp["pairs"], kp["hits"],
              kp["false_alarms"], kp["dprime"], kp["auroc"]]]
    for check in o.get("positive_check") or []:
        for r in check["rows"]:
            krows.append([f"{r['role']}: {r['model']} ({r['readout']})", ours(data, _runs_named(data, "owmi-known-positive")),
                          str(r["pairs"]),
                          f"{r['hits']}/{r['pairs']}", f"{r['false_alarms']}/{r['pairs']}",
                          "n/a" if r["dprime"] is None else f"{r['dprime']:.2f}{ci(r['dprime_ci'])}",
                          "n/a" if r["auroc"] is None else f"{r['auroc']:.3f}{ci(r['auroc_ci'])}"])
    return ["### Beside the paper: pooled detection, its equivalence bound and the known positive", "", papers["INSTRUMENTS"], "",
            f"Paper rows: {papers['OWMI_CITE']}. Our rows: `owmi score`'s pooled rows (complete-pair coding, "
            "item-clustered 95% bootstrap CI; the bound is its inverted TOST) and the known-positive check "
            "(`known_positive_check.json` in the anchor directory).", "",
            markdown_table(["Pool", "Source", "Pairs", "d' [95% CI]", "AUROC [95% CI]", "Equivalence bound"], rows,
                           "OWMI: pooled detection against paired sham"), "",
            markdown_table(["Model", "Source", "Pairs", "Hits", "False alarms", "d' [95% CI]", "AUROC [95% CI]"], krows,
                           "OWMI: the known positive through the pipeline"), ""]


def _num(x, d: int) -> str:
    return "n/a" if x is None else f"{x:,.{d}f}"


def scale_section(data: dict, figures: dict[str, str]) -> list[str]:
    rows, mem, kills = [], [], []
    gap = next((e["session_gap_s"] for e in data.get("scale") or []), "")
    status = (data.get("sleight") or {}).get("status", {})
    for e in data.get("scale") or []:
        r, t = e["records"] or {}, e["time"] or {}
        state = trials_cell(status[e["run"]]) if e["run"] in status else ""
        name = Path(e["run"]).name
        name = f"{Path(e['run']).parent.name}/{name}" if name.startswith("run-") else name  # a check's own run
        rate = e.get("rate") or {}
        rows.append([name + (f" ({state})" if state else ""), _num(r.get("records"), 0),
                     _num(r.get("tokens"), 0), _num(r.get("sessions"), 0), _num(r.get("span_s"), 0),
                     _num(r.get("records_per_s"), 2), _num(rate.get("tokens_per_s"), 1), rate.get("basis", ""),
                     _num(t.get("wall_s"), 0), _num(t.get("cpu_s"), 0), _num(t.get("max_rss_mb"), 0)])
        if e.get("rss"):
            m = e["rss"]
            mem.append([Path(e["run"]).name, m["file"], str(m["n"]),
                        f"{m['loaded'][0]}: {m['loaded'][1]:,.0f} / {m['loaded'][2]:,.0f}",
                        f"{m['last'][0]}: {m['last'][1]:,.0f} / {m['last'][2]:,.0f}", f"{m['growth_rss_mb']:+,.0f}",
                        f"{m['peak_hwm_mb']:,.0f}"])
        if e.get("kills"):
            kills += [f"`{Path(e['run']).name}` (`{Path(e['run']).name}.kills.txt`, as written):", "",
                      *[f"    {line}" for line in e["kills"]], ""]
            st = status.get(e["run"])
            if st:
                kills += [f"Now stored in `{Path(e['run']).name}`: {st['trials']:,} trials, {st['distinct_keys']:,} "
                          f"distinct trial keys (a duplicate would make the two differ), of {st['expected']:,}.", ""]
    out = ["## Scale", "",
           "From the same runs. Records, tokens and sessions are read from each run's stored records (`created_at`): a "
           f"session is a stretch with no gap over {gap} s (a kill and a resume start a new one), its span runs "
           "from its first to its last stored record (model load and the first batch are outside it). Tokens/s is "
           "decoded tokens over the time named in its last column: where a memory log gives the last process's start, "
           "that process's tokens from its start to its last stored record; else the process's wall time; else the "
           "summed session spans (Sleight of Word: the clean answers plus each trial's tokens "
           "after its first swap; Exact Words: new tokens; OWMI's choice read-out decodes no answer: records/s). "
           "Wall, CPU and peak memory are the last process's `/usr/bin/time -v` output, where the logs were given "
           "(`--logs`). The machine is shared: wall times include waiting for the 2 cores.", "",
           markdown_table(["Run", "Records", "Decoded tokens", "Sessions", "Span (s)", "Records/s", "Tokens/s",
                           "Tokens/s over", "Wall (s)", "CPU (s)", "Peak RSS (MB)"], rows, "Time and throughput per run"),
           ""]
    if mem:
        out += [markdown_table(["Run", "Log", "Samples", "After the model loaded: time: VmHWM / VmRSS (MB)",
                                "Last sample: VmHWM / VmRSS (MB)", "RSS growth (MB)", "Peak VmHWM (MB)"], mem,
                               "Memory over the run (one sample a minute)"), ""]
        for e in data.get("scale") or []:
            m = e.get("rss")
            if m:
                out.append(f"- `{Path(e['run']).name}`: " + (
                    f"flat: resident memory after the last sample is within {100 * m['flat_within']:.0f}% of the "
                    f"sample after the model loaded ({m['growth_rss_mb']:+,.0f} MB)" if m["flat"] else
                    f"resident memory {'grew' if m['growth_rss_mb'] > 0 else 'fell'} after the model loaded: "
                    f"{m['growth_rss_mb']:+,.0f} MB ({100 * m['growth_rss_share']:+.1f}%), more than the flat band; "
                    "see the figure for when") + _after_peak(m))
        out += [""] + [f"![{k}]({v})" for k, v in sorted(figures.items()) if k.startswith("rss_")] + [""]
    out += settings_section(data)
    out += ["### Kills and resumes", ""] + (kills or ["No kill record was given (`RUN.kills.txt` in `--logs`).", ""])
    return out


def _distinct(sessions: list[dict], field: str) -> str:
    return ", ".join(sorted({str(s[field]) for s in sessions if s.get(field) is not None})) or "unset"


def settings_section(data: dict) -> list[str]:
    """Per run, the processes that wrote it as its ``sessions`` table records them: torch threads change the bits
    (docs/reproducing.md), so a rerun meant to match bit for bit needs the same count. The threads, variables and
    commits shown are those of the processes that stored records; one that resumed finished work stored none and
    is counted apart (so is one killed before its first batch)."""
    rows = []
    for e in data.get("scale") or []:
        name = Path(e["run"]).name
        name = f"{Path(e['run']).parent.name}/{name}" if name.startswith("run-") else name
        ss, pr = e.get("settings") or [], e.get("processes")
        if not ss or not pr:
            rows.append([name, "0", "", "not recorded: written before runs recorded their sessions", "", ""])
            continue
        idle = pr["recorded"] - pr["storing"]
        procs = f"{pr['recorded']}" + (f" ({idle} stored no record)" if idle else "")
        stored = f"{pr['stored']:,}" + (f"; {pr['before']:,} before runs recorded their sessions" if pr["before"] else "")
        storing = [s for s in ss if s.get("stored")]
        rows.append([name, procs, stored, *((_distinct(storing, k) for k in ("torch_threads", "omp", "commit"))
                                            if storing else ("none stored a record", "", ""))])
    return ["### Settings per process", "",
            "Each process that opens a run records what it computed with in the run's `sessions` table "
            "(`tamperbench.runs.session`): torch's thread count, the thread variables, the commit. Under another "
            "thread count a CPU sums in another order, and a sampled answer can part ways where it meets a near tie "
            "([Reproducing](reproducing.md)): rerun with the count shown to match a run bit for bit. A record "
            "belongs to the process that last opened the run before it was stored (its `created_at`); the thread "
            "columns are those of the processes that stored records.", "",
            markdown_table(["Run", "Processes recorded", "Records they stored", "Torch threads", "OMP_NUM_THREADS",
                            "Commit"], rows), ""]


def _after_peak(m: dict) -> str:
    """Per process, what memory did after its peak last rose (``results_scale.processes``): flat since then is
    the decoder having met its largest batch; a peak still rising at the end would be a leak."""
    procs = m.get("processes") or []
    if not procs:
        return ""
    held = [p for p in procs if p["plateau"]]
    text = (f"; per process ({len(procs)}), from when its peak (VmHWM) last rose to its last sample: "
            + ", ".join(f"{p['after_peak_growth_mb']:+,.0f} MB over {p['after_peak_min']} min" for p in procs))
    rising = [p for p in procs if p["long"] and not p["plateau"]]  # ran a while, its peak still rising near its end
    if rising:
        p = rising[0]
        return text + (f": the process started {p['start']} ran {p['loaded_min']} minutes after its model loaded and "
                       f"its peak still rose within its last {m['warm_minutes']}: not flat")
    if not held:
        return text + f": no process held its peak for {m['warm_minutes']} minutes, so no plateau is measured"
    worst = max(held, key=lambda p: abs(p["after_peak_share"]))
    flat = abs(worst["after_peak_share"]) <= m["flat_within"]
    return text + (f": in every process that held its peak for {m['warm_minutes']} minutes or more, resident memory "
                   "stayed within the flat band after it (the rise comes with each process's peak allocation, "
                   "not with the trials it ran after it)" if flat else
                   f": resident memory still moved after the peak in the process started {worst['start']}")


def rss_figures(data: dict, out: Path, fmt: str, save) -> dict[str, str]:
    """One line plot of VmRSS and VmHWM per run that has an RSS log."""
    import matplotlib.pyplot as plt

    made = {}
    for i, e in enumerate(x for x in data.get("scale") or [] if x.get("rss")):
        s = e["rss"]["samples"]
        fig, ax = plt.subplots(figsize=(6, 2.6))
        ax.plot(range(len(s)), [x[2] for x in s], label="VmRSS")
        ax.plot(range(len(s)), [x[1] for x in s], label="VmHWM (peak so far)", linestyle="--")
        ax.set_xlabel("minutes (one sample a minute)", fontsize=8)
        ax.set_ylabel("MB", fontsize=8)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
        ax.set_title(f"Resident memory: {Path(e['run']).name}", fontsize=9)
        save(fig, out / f"rss_{i}.{fmt}")
        made[f"rss_{i}"] = f"results/rss_{i}.{fmt}"
    return made
