"""The results page (tools/results.py, tools/results_page.py) shows only numbers the runs produced.

Sleight of Word runs are written through the real store with no model (``sleight.synthetic``); Exact Words
rows go through the real ``quote.tables.summarise``; the OWMI section gets condition rows shaped like
``owmi.score.tables.SQL``'s. Every number on the rendered page must be a value of the collected data (as shown,
rounded to the digits shown, or as a percentage); the committed page must be exactly what its committed
``results.json`` renders to.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tamperbench.quote.tables import summarise, to_markdown
from tamperbench.sleight.records import TRIALS_TABLE
from tamperbench.sleight.synthetic import write_synthetic_run
from tamperbench.store.run_store import DB_FILE

ROOT = Path(__file__).resolve().parents[3]
NUMBER = re.compile(r"(?<![\w.,])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")  # 10,100 is one number
MACHINE = {"date": "2026-12-01 21:00 UTC", "command": "python tools/results.py --size cpu-small",
           "commit": "c" * 40, "dirty": False, "cpus": 2, "torch_threads": 1, "torch": "2.13.0+cpu",
           "python": "3.11.7", "platform": "Linux x86_64", "tamperbench": "0.1.0"}


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _values(obj, out: set[float]) -> set[float]:
    """Every number in the data: JSON numbers and the numbers inside its strings (tables, notes, commands)."""
    if isinstance(obj, bool) or obj is None:
        return out
    if isinstance(obj, (int, float)):
        out.add(float(obj))
    elif isinstance(obj, str):
        out.update(float(x.replace(",", "")) for x in NUMBER.findall(obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _values(k, out)
            _values(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _values(v, out)
    return out


def foreign_numbers(page: str, data: dict) -> list[str]:
    """Numbers on the page that are no value of ``data`` at the digits shown (nor that value x 100)."""
    values = _values(data, set())
    bad = []
    for tok in NUMBER.findall(page):
        digits = len(tok.split(".")[1]) if "." in tok else 0
        shown = float(tok.replace(",", ""))
        if not any(round(v, digits) == shown or round(100 * v, digits) == shown for v in values):
            bad.append(tok)
    return bad


def _quote_rows() -> list[dict]:
    def row(model, arm, cat, item, dirty=False):
        return {"model_label": model, "preset": "standard", "arm": arm, "item_id": item, "category": cat,
                "sub_label": None, "dirty": dirty, "repeat": 0, "gold": "gold " + item,
                "evidence": {"planted_span_present": False} if dirty else {}}

    return [row("m1", "plain", "faithful", "S01"), row("m1", "plain", "truncated", "S02"),
            row("m1", "strict", "faithful", "S01"), row("m1", "strict", "rewritten", "S03", dirty=True),
            row("m2", "plain", "faithful", "S01"), row("m2", "strict", "faithful", "S02")]


def _owmi(parsed: int) -> dict:
    cond = [{"track": "A", "hook_scope": "all", "condition": c, "tier": 0, "runs": 3, "paired": 3,
             "parsed": parsed, "yes_rate": (1 / 3) if parsed else None, "rubric_rate": None,
             "js": 0.01234 if c != "sham" else 0.0, "causal": None} for c in ("intervention", "sham", "random")]
    return {"runs": [{"run": "runs/results/owmi-quick-embedded", "spec": {"preset": "quick"}, "conditions": cond}],
            "score_md": None, "positive_check_md": None}


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("results")
    runs = [str(write_synthetic_run(tmp / f"sleight-{m}", questions=3, words=3, model=m, seed=i))
            for i, m in enumerate(("synthetic-a", "synthetic-b"))]
    summary = summarise(_quote_rows())
    data = {"size": "cpu-small", "machine": MACHINE, "notes": [], "steps": ["tamperbench sleight run ..."],
            "sleight": _tool("results_collect").collect_sleight(runs, tmp / "tables"),
            "quote": {"runs": [], "summary": summary, "markdown": to_markdown(summary)}, "owmi": _owmi(2)}
    return json.loads(json.dumps(data, default=str)), runs, tmp


def test_every_number_on_the_page_is_a_value_of_the_runs(collected):
    data, _, tmp = collected
    page_mod = _tool("results_page")
    page = page_mod.render(data, page_mod.figures(data, tmp))
    assert foreign_numbers(page, data) == []
    # the check bites: a number typed into the page, or a cell changed after collection, is caught
    assert foreign_numbers(page + "\nThe model flags 37.5% of swaps.\n", data) == ["37.5"]
    # a rate cell of a table changed after collection (the first one on the page, whichever table it is in)
    cell = re.search(r"\| (\d+\.\d)% \|", page)
    assert cell, page
    tampered = page[:cell.start(1)] + "12345.6" + page[cell.end(1):]
    assert foreign_numbers(tampered, data) == ["12345.6"]


def test_sleight_section_counts_match_the_stored_trials(collected):
    data, runs, _ = collected
    page_mod = _tool("results_page")
    page = page_mod.render(data, {})
    t3 = data["sleight"]["tables"]["table3"]
    for run, row in zip(runs, t3["rows"]):
        with duckdb.connect(str(Path(run) / DB_FILE), read_only=True) as con:
            stored = con.execute(f'SELECT count(*), sum(swap_count) FROM "{TRIALS_TABLE}"').fetchone()
        assert (int(row[2]), int(row[3])) == stored == (9, 9)  # Trials and Swaps columns: 3 questions x 3 words
        assert f"| {row[0]} | 0.0 | 9 | 9 | 0.0 |" in page
    m = data["sleight"]["models"][0]
    lo, hi = m["delta_surprisal"]["lo"], m["delta_surprisal"]["hi"]
    assert f"[{lo:+.2f}, {hi:+.2f}]" in page  # Table 1's interval is the runs' bootstrap interval


def test_unparsed_owmi_table_says_so_instead_of_zero(collected):
    data, _, _ = collected
    page_mod = _tool("results_page")
    parsed = page_mod.render(dict(data, owmi=_owmi(2)), {})
    unparsed = page_mod.render(dict(data, owmi=_owmi(0)), {})
    assert "No report parsed" not in parsed and "| 2/3 | 0.33 |" in parsed
    assert "No report parsed in this run" in unparsed and "| 0/3 | n/a |" in unparsed
    mixed = _owmi(2)
    mixed["runs"][0]["conditions"][1].update(parsed=0, yes_rate=None)  # sham: nothing parsed
    page = page_mod.render(dict(data, owmi=mixed), {})
    assert "their yes-rate is n/a, not zero" in page and "Only these rows parsed any report: A/all intervention, " \
        "A/all random." in page


def test_the_committed_page_is_what_its_results_json_renders_to():
    docs = ROOT / "docs"
    stored = docs / "results" / "results.json"
    if not stored.is_file():
        pytest.skip("no committed results page yet")
    page_mod = _tool("results_page")
    data = json.loads(stored.read_text())
    page = page_mod.render(data, page_mod.existing(docs / "results"))
    assert page == (docs / "results.md").read_text()
    assert foreign_numbers(page, data) == []
    assert data["machine"]["commit"] in page and data["machine"]["command"] in page


def test_owmi_score_sections_are_copied_as_score_printed_them(collected):
    data, _, _ = collected
    page_mod = _tool("results_page")
    md = ("# OWMI score\n\nRuns: r (12 analysable rows)\n\n## Reportability profile (x)\n\n| a |\n|---|\n| 0.125 |\n\n"
          "## Detection against paired sham (y)\n\nz\n\n### Pooled (p)\n\n- q\n\n## Variance components (v)\n\n- not shown\n\n"
          "## Sensitivity anchors\n\n- known positive: hits 4/32\n\n## Claim verdicts (Appendix D.5)\n\n- level 0\n")
    page = page_mod.render(dict(data, owmi=dict(_owmi(2), score_md=md)), {})
    for shown in ("Runs: r (12 analysable rows)", "#### Reportability profile (x)", "| 0.125 |",
                  "##### Pooled (p)", "#### Sensitivity anchors", "hits 4/32", "#### Claim verdicts", "- level 0"):
        assert shown in page
    assert "Variance components" not in page and "not shown" not in page and "left in the file" not in page
    check = "| adapted (known positive): `e+peft:a` | choice | 6 (3) | 6/6 | +0.833 |\n\nPASS: under the choice read-out"
    page = page_mod.render(dict(data, owmi=dict(_owmi(2), positive_check_md=check)), {})
    assert check in page and foreign_numbers(page, dict(data, owmi=dict(_owmi(2), positive_check_md=check))) == []


# --- the full-size page: run states, the papers' numbers beside ours, scale evidence -------------------------

TIME_V = """\tCommand being timed: "tamperbench sleight run --preset paper"
\tUser time (seconds): 3012.50
\tSystem time (seconds): 41.25
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:10:07
\tMaximum resident set size (kbytes): 4412872
\tExit status: 0
"""
RSS_LOG = "".join(f"2026-12-02T12:{m:02d}:10Z VmHWM: {hwm} VmRSS: {rss} \n" for m, hwm, rss in
                  ((0, 509800, 509800), (1, 4266172, 4266172), (2, 4325192, 4227624), (3, 4325192, 4301000)))


def _hold(run: Path):
    """A real second process that holds the run's writer lock (as a `sleight run` still writing it does)."""
    code = ("import sys, time; from tamperbench.store import RunStore; s = RunStore.open_existing(sys.argv[1]); "
            "print('held', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(run)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """A paper-size page over synthetic runs: one complete, one being written by another process, one that
    stopped part-way (resumable), one not started; real logs in the formats the page reads."""
    tmp = tmp_path_factory.mktemp("full")
    results, collect, scale = _tool("results"), _tool("results_collect"), _tool("results_scale")
    runs = {k: str(write_synthetic_run(tmp / f"sleight-paper-{k}", questions=3, words=3, model=k, seed=i))
            for i, k in enumerate(("complete", "writing", "stopped"))}
    with duckdb.connect(str(Path(runs["stopped"]) / DB_FILE)) as con:  # an interrupted run: 5 of its 9 trials
        con.execute(f'DELETE FROM "{TRIALS_TABLE}" WHERE key IN (SELECT key FROM "{TRIALS_TABLE}" LIMIT 4)')
    logs = tmp / "logs"
    logs.mkdir()
    (logs / "sleight-paper-complete.err").write_text("progress...\n" + TIME_V)
    (logs / "sleight-paper-complete.rss").write_text(RSS_LOG)
    (logs / "sleight-paper-complete.kills.txt").write_text("SIGKILL at 2026-12-02T09:49:05Z; stored 1111 trials\n")
    holder = _hold(Path(runs["writing"]))
    try:
        order = [runs["complete"], runs["writing"], runs["stopped"], str(tmp / "sleight-paper-later")]
        sleight = collect.collect_sleight(order, tmp / "tables", tmp / "work")
        scale_rows = [scale.evidence(r, collect.snapshot(Path(r), tmp / "copies") if Path(r).is_dir() else None, logs)
                      for r in order]
    finally:
        holder.kill()
        holder.wait()
    summary = summarise(_quote_rows())
    per_model = {m: {"n": p["n"], "counts": {"faithful": p["faithful"], "truncated": 1}, "pooled": p}
                 for m, p in ((p["model_label"], p) for p in summary["per_model"])}
    owmi = dict(_owmi(2), pooled=[{"pool": "embedded · all cells (choice)", "pairs": 36, "items": 9, "dprime": 0.1234,
                                   "dprime_ci": [-0.2, 0.45], "auroc": 0.5123, "auroc_ci": [0.41, 0.6],
                                   "equivalence": [{"alpha": 0.05, "bound": 0.0987}]},
                                  {"pool": "gemma3-270m · all cells (choice)", "pairs": 40, "items": 9, "item_floor": 10,
                                   "dprime": 0.0, "dprime_ci": [0.0, 0.0], "auroc": 0.4568, "auroc_ci": [0.41, 0.501],
                                   "auroc_se": 0.0231, "equivalence": [], "no_bound_reason": "9 items, below the 10-item floor"}],
                positive_check=[{"rows": [{"role": "adapted", "model": "embedded+peft:a", "readout": "choice",
                                           "pairs": 100, "hits": 100, "false_alarms": 0, "dprime": 5.1517,
                                           "dprime_ci": [5.1517, 5.1517], "auroc": 1.0, "auroc_ci": [1.0, 1.0]}]}])
    papers = _tool("results_papers")
    data = {"size": "paper", "machine": dict(MACHINE, command="python tools/results.py --size paper"), "notes": [],
            "steps": ["tamperbench sleight run ..."], "sleight": sleight, "owmi": owmi, "scale": scale_rows,
            "quote": {"runs": [], "summary": summary, "markdown": to_markdown(summary), "per_model_paper": per_model},
            "papers": {k: getattr(papers, k) for k in dir(papers) if k.isupper()}}
    assert results.QUOTE_REPEATS  # the tool itself loads
    return json.loads(json.dumps(data, default=str)), runs, tmp


def test_full_page_every_number_is_a_value_of_the_runs_or_the_cited_papers(full):
    data, _, tmp = full
    page_mod = _tool("results_page")
    page = page_mod.render(data, page_mod.figures(data, tmp))
    assert "**full size**" in page and data["machine"]["commit"][:10] in page
    assert (bad := foreign_numbers(page, data)) == [], sorted(set(bad))
    assert foreign_numbers(page + "\nFlagged in 12,345 trials.\n", data) == ["12,345"]  # the check bites
    for paper_row in ("| Qwen2.5-14B | paper, its models (Table 1) | 10,100 | 46 | 78 | 0 | 76 | 48 | 1.3 | +0.18 | "
                      "+0.38 |", "| all 13 models | paper, its models | 962 | 911 of 962 | 0 | 26 | 13 | 12 |",
                      "| pooled dose battery | paper, its models | 11,216 | 0.0039 [0.0017, 0.0062] | 0.5007 |",
                      "| 100 | 100/100 | 0/100 (all 100 sham trials identified) | 5.15 | 1.0 |"):
        assert paper_row in page
    assert "This compares instruments, not models." in page
    assert "no real judge model can run on this machine" in page
    assert "| no bound: 9 items, below the 10-item floor |" in page  # the reason that applies, not a guess at two


def test_full_page_shows_each_run_state_never_an_unfinished_run_as_complete(full):
    data, runs, _ = full
    status = data["sleight"]["status"]
    assert [status[runs[k]]["state"] for k in ("complete", "writing", "stopped")] == \
        ["complete", "run in progress", "resumable"]
    assert [(status[runs[k]]["trials"], status[runs[k]]["distinct_keys"]) for k in ("complete", "writing", "stopped")] \
        == [(9, 9), (9, 9), (5, 5)]
    page = _tool("results_page").render(data, {})
    assert "- `sleight-paper-complete`: 9 of 9; 9 distinct keys" in page
    assert "- `sleight-paper-writing`: 9 of 9, run in progress; 9 distinct keys" in page
    assert "- `sleight-paper-stopped`: 5 of 9, resumable; 5 distinct keys" in page
    assert "- `sleight-paper-later`: not started" in page


def test_full_page_evidence_columns_are_the_detector_counts_of_the_stored_trials(full):
    data, runs, _ = full
    ev = data["sleight"]["evidence"][runs["complete"]]
    assert ev["scored"] == 9 and ev["flagged_rate"] == ev["flagged"] / 9
    with duckdb.connect(str(Path(runs["complete"]) / DB_FILE), read_only=True) as con:
        tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert "judge_evidence" not in tables  # scored on a copy: the page never writes into a run
    page = _tool("results_page").render(data, {})
    row = next(line for line in page.splitlines() if line.startswith("| complete | tamperbench, measured"))
    assert row.endswith(f"| {100 * ev['flagged_rate']:.1f} ({ev['flagged']}) | {100 * ev['aware_rate']:.1f} "
                        f"({ev['aware']}) |")


def test_full_page_scale_section_reads_the_logs_and_the_records(full):
    data, runs, _ = full
    e = data["scale"][0]
    assert e["time"]["wall_s"] == 70 * 60 + 7 and e["time"]["cpu_s"] == 3012.5 + 41.25
    assert e["rss"]["loaded"][0] == "2026-12-02T12:01:10Z" and e["rss"]["flat"]
    assert e["records"]["records"] == 9 + 3 and e["records"]["sessions"] == 1
    own = e["records"]["last_process"]  # the process that started at the memory log's first sample stored them all
    assert own["records"] == 12 and own["tokens"] == e["records"]["tokens"]
    assert e["rate"]["tokens_per_s"] == own["tokens_per_s"] and e["rate"]["basis"].startswith("last process")
    page = _tool("results_page").render(data, {})
    assert "| 4,207 | 3,054 | 4,309 |" in page  # wall, CPU (s) and peak RSS (MB) of the time -v block
    assert "SIGKILL at 2026-12-02T09:49:05Z; stored 1111 trials" in page
    assert "Now stored in `sleight-paper-complete`: 9 trials, 9 distinct trial keys" in page
    assert "flat: resident memory after the last sample is within 5% of the sample after the model loaded" in page
    with pytest.raises(SystemExit):  # a bad --size is one line
        _tool("results").plan("huge", Path("runs"), ["embedded"], [], set(), set())


def test_paper_plan_runs_both_models_without_a_judge_model():
    results = _tool("results")
    p = results.plan("paper", Path("runs/results"), ["embedded", "gemma3-270m"], [], {"--readout"}, {"--check"})
    steps = [" ".join(s) for s in p.steps]
    assert [s for s in steps if s.startswith("sleight run")] == [
        f"sleight run --model {m} --preset paper --out runs/results/sleight-paper-{m}" for m in ("embedded", "gemma3-270m")]
    assert not any(s.startswith("judge run") for s in steps) and "judge evidence runs/results/sleight-paper-embedded" in steps
    owmi = [s for s in steps if s.startswith("owmi run")]
    assert owmi == [f"owmi run --preset standard --model {m} --readout choice --out runs/results/owmi-standard-choice-{m}"
                    for m in ("embedded", "gemma3-270m")] + [
        "owmi run --preset standard --model embedded --readout constrained --out "
        "runs/results/owmi-standard-constrained-embedded"]
    assert any("`constrained` on the embedded model only" in n and "--model gemma3-270m --readout constrained" in n
               for n in p.notes)
    assert all("--sampling paper --repeats 3" in s for s in steps if s.startswith("quote run"))
    assert results._outputs(p.steps[-1]) == [*p.owmi, *p.anchors, p.score]


def test_print_steps_is_the_plan_named_as_the_page_reads_its_logs(tmp_path, capsys):
    """tools/results_background.sh runs what ``--print-steps`` prints: the plan's steps, each under the log name
    the page's scale section looks up (the run directory's name; RUN.evidence for the evidence detector)."""
    results = _tool("results")
    assert results.main(["--size", "paper", "--runs", str(tmp_path), "--print-steps"]) == 0
    lines = [ln.split("\t") for ln in capsys.readouterr().out.splitlines()]
    models, notes = results.installable_models()
    p = results.plan("paper", tmp_path, models, notes, results._cli_options("owmi", "run"),
                     results._cli_options("owmi", "known-positive"))
    assert [f[1:] for f in lines] == p.steps and not list(tmp_path.iterdir())  # nothing run, nothing written
    names = {f[0]: f[1:] for f in lines}
    assert names["sleight-paper-embedded"][:2] == ["sleight", "run"]
    assert names["sleight-paper-embedded.evidence"] == ["judge", "evidence", str(tmp_path / "sleight-paper-embedded")]
    assert names["owmi-score"][:2] == ["owmi", "score"] and len(names) == len(lines)
    background = (ROOT / "tools" / "results_background.sh").read_text()
    assert "--print-steps" in background and "sleight run" not in background  # the script holds no list of its own


def test_a_rerun_skips_steps_whose_runs_are_unchanged_and_leaves_a_run_being_written_alone(tmp_path, capsys):
    results = _tool("results")
    run = str(write_synthetic_run(tmp_path / "sleight-a", questions=2, words=2, model="a"))
    p = results.Plan("cpu-small", steps=[["judge", "evidence", run]])
    state = tmp_path / "steps.json"
    assert results.execute(p, state) == [] and "evidence: 4 new rows" in capsys.readouterr().out
    assert results.execute(p, state) == [] and "evidence:" not in capsys.readouterr().out  # unchanged: skipped
    with duckdb.connect(str(Path(run) / DB_FILE)) as con:  # the run changed (a resume added trials): run again
        con.execute("DELETE FROM judge_evidence")
    assert results.execute(p, state) == [] and "evidence: 4 new rows" in capsys.readouterr().out
    holder = _hold(Path(run))
    try:
        skipped = results.execute(results.Plan("cpu-small", steps=[["judge", "evidence", run]]), tmp_path / "s2.json")
    finally:
        holder.kill()
        holder.wait()
    assert skipped == [f"`tamperbench judge evidence {run}`: skipped, {run} is being written by another process"]


def test_a_clone_of_the_runs_and_their_state_skips_the_finished_steps(tmp_path, capsys):
    """The state names files by content and paths relative to the runs folder: a copy of the folder elsewhere,
    its files rewritten (new modification times, as git writes them), skips what it holds; a changed byte
    runs the step again."""
    import shutil

    results = _tool("results")
    here, there = tmp_path / "here" / "runs", tmp_path / "there" / "runs"
    run = write_synthetic_run(here / "sleight-a", questions=2, words=2, model="a")
    assert results.execute(results.Plan("paper", steps=[["judge", "evidence", str(run)]]), here / "paper" / "steps.json") == []
    assert "evidence: 4 new rows" in capsys.readouterr().out
    shutil.copytree(here, there, copy_function=shutil.copy)  # copy: content only, fresh modification times
    state = json.loads((there / "paper" / "steps.json").read_text())
    assert list(state) == ["judge evidence sleight-a"] and state["judge evidence sleight-a"][0][0] == "sleight-a/records.duckdb"
    clone = results.Plan("paper", steps=[["judge", "evidence", str(there / "sleight-a")]])
    assert results.execute(clone, there / "paper" / "steps.json") == [] and "evidence:" not in capsys.readouterr().out
    with duckdb.connect(str(there / "sleight-a" / DB_FILE)) as con:
        con.execute("DELETE FROM judge_evidence")
    results.execute(clone, there / "paper" / "steps.json")
    assert "evidence: 4 new rows" in capsys.readouterr().out


def test_the_pages_owmi_standard_preset_is_the_quick_preset_on_every_built_in_item():
    from tamperbench.owmi.run.spec import load_items
    from tamperbench.owmi.run.spec import PRESETS

    quick, standard = PRESETS["quick"](), PRESETS["standard"](models=["embedded"])
    assert standard.model_dump(exclude={"items_per_benchmark", "models"}) == \
        quick.model_dump(exclude={"items_per_benchmark", "models"})
    items = load_items("builtin", standard.items_per_benchmark)
    assert len({it.id for it in items}) == 9 and {it.domain for it in items} == {"knowledge", "commonsense", "arithmetic"}


def test_owmi_score_waits_until_every_run_it_reads_exists(tmp_path):
    results = _tool("results")
    p = results.Plan("paper", steps=[["owmi", "score", str(tmp_path / "owmi-a"), "--out", str(tmp_path / "score")]])
    assert results.execute(p, tmp_path / "steps.json") == [
        f"`tamperbench owmi score {tmp_path / 'owmi-a'} --out {tmp_path / 'score'}`: skipped, {tmp_path / 'owmi-a'} "
        "not run yet"]


def _rss_line(minute: int, hwm_mb: int, rss_mb: int) -> str:
    return f"2026-12-02T{12 + minute // 60:02d}:{minute % 60:02d}:10Z VmHWM: {hwm_mb * 1024} VmRSS: {rss_mb * 1024}\n"


def test_memory_is_read_per_process_from_its_peak(tmp_path):
    """A run resumed once: the first process rises to its peak in its first minutes and stays flat for 30
    minutes; the resumed one (VmHWM falls: a new process) keeps rising to its end, as a leak would. The page
    names each process's change after its peak and calls the run flat only where every process that held its
    peak for 10 minutes stayed in the band; the leaking process makes it say so."""
    scale, compare = _tool("results_scale"), _tool("results_page_compare")
    flat = [_rss_line(0, 300, 300), _rss_line(1, 4000, 3900), _rss_line(2, 4500, 4300)]
    flat += [_rss_line(m, 4500, 4300 - (m % 3)) for m in range(3, 33)]
    leak = [_rss_line(40, 310, 310), _rss_line(41, 4000, 4000)] + [_rss_line(m, 4000 + 30 * (m - 41),
                                                                             4000 + 30 * (m - 41)) for m in range(42, 70)]
    log = tmp_path / "r.rss"
    log.write_text("".join(flat))
    m = scale.rss_log(log)
    [p] = m["processes"]
    assert (p["peak"][0], p["after_peak_min"], p["plateau"]) == ("2026-12-02T12:02:10Z", 30, True)
    assert p["after_peak_growth_mb"] == pytest.approx(-2, abs=1)
    assert "stayed within the flat band after it" in compare._after_peak(m)
    log.write_text("".join(flat + leak))
    m = scale.rss_log(log)
    assert [p["start"] for p in m["processes"]] == ["2026-12-02T12:00:10Z", "2026-12-02T12:40:10Z"]
    assert m["processes"][1]["after_peak_min"] == 0 and not m["processes"][1]["plateau"]
    text = compare._after_peak(m)
    assert "stayed within the flat band" not in text  # the leaking process holds no plateau: not called flat
    assert "the process started 2026-12-02T12:40:10Z ran 28 minutes after its model loaded and its peak still rose" in text
    log.write_text("".join(leak[:2] + [_rss_line(m, 4900, 4500 + 10 * (m - 42)) for m in range(42, 70)]))
    text = compare._after_peak(scale.rss_log(log))  # a peak held for 27 minutes while resident memory rose 6%
    assert "still moved after the peak in the process started 2026-12-02T12:40:10Z" in text


def test_the_settings_table_reads_each_runs_sessions_and_says_when_none_were_recorded(tmp_path):
    """Run a: two processes (one and two threads); the first stored every record, the second opened the run
    after them (a resume of finished work) and is counted apart, its thread count not shown as the run's. Run c:
    its one recorded process opened it after every record was stored, and a hand-edited row names no time.
    Run b has no sessions table (made before they were recorded): "not recorded", never a thread count."""
    from tamperbench.store import RunStore
    from tamperbench.store.sessions import put_session

    scale, compare = _tool("results_scale"), _tool("results_page_compare")
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for r in (a, b, c):
        write_synthetic_run(r, questions=1, words=1)  # records stored now
    base = {"session": "s1", "started_at": "2000-01-01T00:00:00+00:00", "provenance_id": "p", "env": {}}
    with RunStore.open_existing(a) as store:
        put_session(store, {**base, "recorded_at": "2000-01-01T00:00:01+00:00", "torch_threads": 1,
                           "env": {"OMP_NUM_THREADS": "1"}, "tamperbench_commit": "a" * 40, "tamperbench_dirty": False})
        put_session(store, {**base, "session": "s2", "recorded_at": "2999-01-01T01:00:00+00:00", "torch_threads": 2,
                           "env": {"OMP_NUM_THREADS": "2"}, "tamperbench_commit": "b" * 40, "tamperbench_dirty": True})
    with RunStore.open_existing(c) as store:
        put_session(store, {**base, "recorded_at": "2999-01-01T00:00:00+00:00", "torch_threads": 2})
        put_session(store, {**base, "session": "s3", "recorded_at": "yesterday", "torch_threads": 7})
    data = {"scale": [scale.evidence(str(r), r, None) for r in (a, b, c)]}
    n = data["scale"][0]["records"]["records"]
    assert n > 0 and [s["torch_threads"] for s in data["scale"][0]["settings"]] == [1, 2]
    assert [s["stored"] for s in data["scale"][0]["settings"]] == [n, 0]
    assert data["scale"][2]["processes"] == {"recorded": 2, "storing": 0, "stored": 0, "before": n}
    text = "\n".join(compare.settings_section(data))
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line[:4] in ("| a ", "| b ", "| c ")}
    assert rows["a"] == f"| a | 2 (1 stored no record) | {n:,} | 1 | 1 | {'a' * 12} |"
    assert "not recorded" in rows["b"] and "| 0 |" in rows["b"]
    assert rows["c"] == f"| c | 2 (2 stored no record) | 0; {n:,} before runs recorded their sessions | none stored a record |  |  |"


def test_a_model_not_installed_here_keeps_its_stored_runs_on_the_page_and_skips_only_steps_that_need_it(
        tmp_path, capsys, monkeypatch):
    """A clone on a machine without Gemma 3: its committed runs stay in the plan (the page would otherwise drop
    them), a finished step is skipped by the state as usual, an unfinished one that would load the model is
    skipped with the install command instead of failing; a step that loads no model still runs."""
    import tamperbench.models.installable as installable

    results = _tool("results")
    monkeypatch.setattr(installable, "installed", lambda model: False)
    names = [n for n in installable.MODELS if n != "embedded"]
    assert names and results.installable_models(tmp_path)[0] == ["embedded"]  # nothing stored: left out
    (tmp_path / f"sleight-paper-{names[0]}").mkdir()
    models, notes = results.installable_models(tmp_path)
    assert models == ["embedded", names[0]] and any("its stored runs are shown" in n for n in notes)
    run = str(write_synthetic_run(tmp_path / f"sleight-paper-{names[0]}", questions=1, words=1, model="a"))
    steps = [["sleight", "run", "--model", names[0], "--preset", "paper", "--out", run], ["judge", "evidence", run]]
    skipped = results.execute(results.Plan("paper", steps=steps), tmp_path / "paper" / "steps.json",
                              installed_names={"embedded"})
    assert skipped == [f"`tamperbench {' '.join(steps[0])}`: skipped, {names[0]} is not installed here "
                       f"(`tamperbench models install {names[0]}`)"]
    assert "evidence: 1 new rows" in capsys.readouterr().out


def test_our_rows_name_when_their_runs_were_measured_not_when_the_page_was_built():
    """A row's source names the span of its runs' stored records; the page's build commit is named as such. A
    row whose runs hold no record falls back to the page's date."""
    compare = _tool("results_page_compare")
    data = {"machine": MACHINE, "scale": [
        {"run": "runs/results/quote-standard-paper-r3-embedded",
         "records": {"first": "2026-12-06 19:37:31 UTC", "last": "2026-12-06 19:39:31 UTC"}},
        {"run": "runs/results/quote-standard-paper-r3-gemma3-270m",
         "records": {"first": "2026-12-06 19:41:33 UTC", "last": "2026-12-07 00:01:02 UTC"}},
        {"run": "runs/results/owmi-known-positive-full-embedded/run-choice",
         "records": {"first": "2026-12-06 11:43:19 UTC", "last": "2026-12-06 12:32:19 UTC"}},
        {"run": "runs/results/owmi-standard-choice-embedded", "records": None}]}
    page = f"page built at commit {'c' * 10}"
    assert compare.ours(data, compare._runs_named(data, "quote-", "embedded")) == \
        f"tamperbench, measured 2026-12-06 19:37 to 19:39 UTC (its stored records), {page}"
    assert compare.ours(data, compare._runs_named(data, "quote-")) == \
        f"tamperbench, measured 2026-12-06 19:37 to 2026-12-07 00:01 UTC (its stored records), {page}"
    assert compare.ours(data, compare._runs_named(data, "owmi-known-positive")) == \
        f"tamperbench, measured 2026-12-06 11:43 to 12:32 UTC (its stored records), {page}"
    assert compare.ours(data, compare._runs_named(data, "owmi-standard")) == compare.ours(data) == \
        f"tamperbench, measured, {MACHINE['date']}, commit {'c' * 10}"


def test_the_page_names_paths_as_in_the_repository_whatever_checkout_wrote_the_records():
    """A stored adapter source from another checkout (/elsewhere/runs/results/...) and this checkout's own prefix
    both read runs/results/... in results.json; a path outside the runs folder is left alone."""
    results = _tool("results")
    runs = ROOT / "runs" / "results"
    text = json.dumps({"a": "embedded+peft:/work/other/checkout/runs/results/kp/adapter", "b": f"{ROOT}/runs/results/x",
                       "c": "/usr/lib/python3/runs/elsewhere"})
    assert json.loads(results.repo_paths(text, runs)) == {
        "a": "embedded+peft:runs/results/kp/adapter", "b": "runs/results/x", "c": "/usr/lib/python3/runs/elsewhere"}
