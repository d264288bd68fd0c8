"""What ``docs/results.md`` shows, read from the run directories by the suites' own code (``tools/results.py``).

Every table is the suites' own: ``sleight.tables.render_runs``, ``judge``'s evidence detector
(``judge.runner.write_evidence``, as ``tamperbench judge evidence`` runs it), ``quote.tables.summarise``,
``owmi.score.tables.SQL`` and ``owmi score``'s JSON. A run that another process is still writing is read from a
copy of its database taken at page time (``snapshot``): the page shows it as in progress with its count,
never as complete, and nothing is ever written into a run directory from here.
"""

from __future__ import annotations

import io
import json
import shutil
import time
from pathlib import Path

SNAPSHOT_FILES = ("spec.json", "records.duckdb", "records.duckdb.wal")


def _quiet():
    from rich.console import Console

    return Console(file=io.StringIO(), width=200)


def writer_holds(run: Path) -> bool:
    """Whether another process holds the run's writer lock (``RUN/.lock``, taken by every tamperbench writer)."""
    import fcntl

    lock = Path(run) / ".lock"
    if not lock.is_file():
        return False
    with open(lock, "rb") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


def snapshot(run: Path, tmp: Path) -> Path:
    """A copy of the run's spec and database (with its write-ahead log) under ``tmp``, taken now: readable
    while a writer holds the run, and writable (the evidence detector adds its rows to the copy only)."""
    from tamperbench.errors import UserError
    from tamperbench.store import RunStore

    dst = Path(tmp) / Path(run).name
    for attempt in range(3):  # a copy taken mid-append can hold a torn log entry: take it again
        shutil.rmtree(dst, ignore_errors=True)
        dst.mkdir(parents=True)
        for name in SNAPSHOT_FILES:
            if (Path(run) / name).is_file():
                shutil.copy2(Path(run) / name, dst / name)
        try:
            RunStore.open_existing(dst, read_only=True).close()
            return dst
        except UserError:
            if attempt == 2:
                raise
            time.sleep(2)
    return dst


def sleight_status(store, held: bool) -> dict:
    """Trials stored, distinct trial keys, the preset's size (questions x substitutions) and the run's state."""
    from tamperbench.sleight.records import TRIALS_TABLE

    spec = store.spec_dict
    expected = len(spec.get("questions") or []) * len(spec.get("substitutions") or [])
    n, distinct = (store.con.execute(f'SELECT count(*), count(DISTINCT key) FROM "{TRIALS_TABLE}"').fetchall()[0]
                   if store.has_table(TRIALS_TABLE) else (0, 0))
    state = "complete" if n >= expected and not held else ("run in progress" if held else "resumable")
    return {"trials": n, "distinct_keys": distinct, "expected": expected, "state": state}


def evidence_counts(store) -> dict:
    """The rule-based evidence detector over every judgeable trial, counted as ``tamperbench judge evidence``
    prints it (reference cues and rule; with tamperbench's cues too)."""
    from tamperbench.judge.records import read_sleight_trials
    from tamperbench.judge.runner import split_trials, write_evidence

    trials, untouched, _ = split_trials(read_sleight_trials(store))
    write_evidence(store, trials)
    n, fl, aw, fx, ax = store.con.execute(
        "SELECT count(*), sum(flagged::INT), sum(aware::INT), sum(flagged_extended::INT), sum(aware_extended::INT) "
        "FROM judge_evidence").fetchall()[0]
    rate = lambda k: (k or 0) / n if n else None  # noqa: E731
    return {"scored": n, "untouched": untouched, "flagged": fl or 0, "aware": aw or 0, "flagged_extended": fx or 0,
            "aware_extended": ax or 0, "flagged_rate": rate(fl), "aware_rate": rate(aw),
            "flagged_extended_rate": rate(fx), "aware_extended_rate": rate(ax)}


def provenances(store) -> tuple[list[str], list[str]]:
    """The provenance ids of a run's trials, and a note naming the fields in which they differ (a run resumed
    under another model path or version is split into one table row per provenance by the suite's tables)."""
    from tamperbench.sleight.records import TRIALS_TABLE

    ids = [i for (i,) in store.con.execute(
        f'SELECT provenance_id FROM "{TRIALS_TABLE}" GROUP BY 1 ORDER BY min(created_at)').fetchall()]
    if len(ids) < 2:
        return ids, []
    recs = {i: json.loads(r) for i, r in store.con.execute(
        "SELECT id, record FROM provenance WHERE id IN (" + ",".join("?" * len(ids)) + ")", ids).fetchall()}
    first = recs.get(ids[0], {})
    notes = []
    for i in ids[1:]:
        diff = sorted(k for k in set(first) | set(recs.get(i, {})) if first.get(k) != recs.get(i, {}).get(k))
        notes.append(f"{Path(store.run_dir).name}: its trials carry {len(ids)} provenance records, so the tables "
                     f"show one row per provenance; `{ids[0]}` and `{i}` differ only in: {', '.join(diff)}")
    return ids, notes


def collect_sleight(runs: list[str], out_dir: Path, tmp: Path | None = None) -> dict | None:
    """Tables 1-3 (``sleight.tables.render_runs``) over copies of the runs, each run's state and count, and the
    evidence detector's counts per run. Runs not started yet are listed with 0 trials."""
    from tamperbench.sleight.tables import TITLES, render_runs
    from tamperbench.store import RunStore

    tmp = Path(tmp or out_dir) / "snapshots"
    started = [r for r in runs if (Path(r) / "spec.json").is_file() and (Path(r) / "records.duckdb").is_file()]
    status: dict[str, dict] = {r: {"trials": 0, "distinct_keys": 0, "expected": None, "state": "not started"}
                               for r in runs if r not in started}
    if not started:
        return None
    stores, evidence, run_models, prov_notes = [], {}, {}, []
    try:
        for r in started:
            held = writer_holds(Path(r))
            st = RunStore.open_existing(snapshot(Path(r), tmp))
            stores.append(st)
            status[r] = sleight_status(st, held)
            if status[r]["trials"]:
                evidence[r] = evidence_counts(st)
                ids, more = provenances(st)
                run_models[r], prov_notes = [{"provenance_id": i} for i in ids], prov_notes + more
        shown = [(r, st) for r, st in zip(started, stores) if status[r]["trials"]]
        out = render_runs([st for _, st in shown], _quiet(), "default", out_dir, run_names=[r for r, _ in shown]) \
            if shown else {"tables": None, "models": []}
    finally:
        for st in stores:
            st.close()
    out["runs"] = [r for r in started if status[r]["trials"]]
    return {**out, "titles": TITLES, "status": {r: status[r] for r in runs}, "evidence": evidence,
            "run_models": run_models, "provenance_notes": prov_notes}


def collect_quote(runs: list[str], tmp: Path) -> dict | None:
    """``quote.tables.summarise`` over every run, and per model the paper's taxonomy (its class counts)."""
    from tamperbench.quote.tables import load_rows, summarise, to_markdown

    runs = [r for r in runs if (Path(r) / "spec.json").is_file() and (Path(r) / "records.duckdb").is_file()]
    if not runs:
        return None
    from tamperbench.quote.items import load_items
    from tamperbench.store import RunStore

    copies = [snapshot(Path(r), tmp / "snapshots") for r in runs]
    rows = load_rows(copies)
    states = {}
    for r, copy in zip(runs, copies):  # each run's count against its plan: items x arms x repeats
        with RunStore.open_existing(copy, read_only=True) as store:
            spec = store.spec_dict
            n = store.count("quote_trials") if store.has_table("quote_trials") else 0
        items = len(spec.get("item_ids") or load_items(spec.get("preset", "standard")))
        expected = items * len(spec.get("arms") or []) * int(spec.get("repeats") or 1)
        held = writer_holds(Path(r))
        states[r] = {"trials": n, "expected": expected, "distinct_keys": n,
                     "state": "complete" if n >= expected and not held else
                     ("run in progress" if held else "resumable")}
    if not rows:
        return None
    summary = summarise(rows)
    per_model = {}
    for model in sorted({r["model_label"] for r in rows}):
        s = summarise([r for r in rows if r["model_label"] == model], taxonomy="paper")
        counts = {c: sum(arm.get(c, 0) for arm in s["taxonomy"].values()) for c in s["classes"]}
        per_model[model] = {"n": sum(p["n"] for p in s["per_model"]), "counts": counts, "rates": s["rates"],
                            "pooled": s["per_model"][0] if s["per_model"] else None}
    from tamperbench.quote.controls import score_controls

    presets = sorted({str(r.get("preset") or "standard") for r in rows})
    controls = {p: score_controls(p, "paper") for p in presets}  # the scorer on answers of known class
    return {"runs": runs, "summary": summary, "markdown": to_markdown(summary), "per_model_paper": per_model,
            "states": states, "controls": controls}


def collect_owmi(runs: list[str], anchors: list[str], score_dir: str, tmp: Path) -> dict | None:
    """Per run the per-condition summary (``owmi.score.tables.SQL``), the known-positive check's JSON and Markdown,
    ``owmi score``'s Markdown, its pooled rows and the forest plots' rows."""
    from tamperbench.owmi.score.tables import SQL
    from tamperbench.store import RunStore

    out: dict = {"runs": []}
    for run in runs:
        if not (Path(run) / "spec.json").is_file() or not (Path(run) / "records.duckdb").is_file():
            continue
        held = writer_holds(Path(run))
        with RunStore.open_existing(snapshot(Path(run), tmp / "snapshots"), read_only=True) as store:
            cols = [d[0] for d in store.con.execute(SQL).description]
            rows = [dict(zip(cols, r)) for r in store.con.execute(SQL).fetchall()]
            spec = {k: store.spec_dict.get(k) for k in ("readout", "seeds", "models", "items_per_benchmark")}
            n = store.count("owmi_runs") if store.has_table("owmi_runs") else 0
        out["runs"].append({"run": run, "spec": spec, "conditions": rows, "records": n,
                            "state": "run in progress" if held else "stored"})
    checks = [Path(a) / "known_positive_check.md" for a in anchors]
    out["positive_check_md"] = "\n".join(c.read_text() for c in checks if c.is_file()) or None
    out["positive_check"] = [json.loads((Path(a) / "known_positive_check.json").read_text()) for a in anchors
                             if (Path(a) / "known_positive_check.json").is_file()]
    score_md = Path(score_dir) / "owmi_score.md"
    out["score_md"] = score_md.read_text() if score_md.is_file() else None
    score_json = Path(score_dir) / "owmi_score.json"
    out["pooled"] = []
    if score_json.is_file():  # the forest plots' rows: per model, per detection cell (owmi.site_forest)
        from tamperbench.owmi.score.site_forest import forest_rows

        score = json.loads(score_json.read_text())
        out["forest"] = forest_rows(score)
        from tamperbench.owmi.score.verdict import ITEM_FLOOR

        out["pooled"] = [{"pool": p["pool"], "item_floor": ITEM_FLOOR,
                          **{k: p["complete"].get(k) for k in ("pairs", "items", "dprime", "dprime_ci", "auroc",
                                                               "auroc_ci", "auroc_se", "equivalence",
                                                               "no_bound_reason")}}
                         for p in score.get("pooled", [])]
    return out if out["runs"] or out["positive_check"] else None
