"""``make results``: run the suites' presets on the installable models, then regenerate ``docs/results.md``
and its figures (``docs/results/*.svg``) from those runs.

Two sizes (``--size``):

- ``paper`` (``make results``): the paper presets that fit on a CPU: Sleight of Word ``--preset paper`` on
  the embedded model, Exact Words ``standard`` with 5 repeats at temperature 0.7 on every installable model,
  OWMI ``quick`` (with the token-level ``--readout choice`` when this tamperbench has it) and the
  known-positive anchor's ``full`` preset with its ``--check`` under every read-out. Hours on a CPU.
- ``cpu-small`` (``make results RESULTS=cpu-small``): Sleight of Word ``quick`` and Exact Words ``standard``
  (greedy) on every installable model, OWMI ``quick`` and the known-positive anchor's ``test`` preset with its
  ``--check`` (choice read-out, 3 items): about 15-20 minutes on 2 idle cores.

Every Sleight of Word run is judged by the embedded model as its one juror. A run directory that holds an
older spec (a preset changed since) is refused in one line; move it away to rerun it.

Every step is the CLI command a user would type, run in-process through the typer app (as ``tamperbench
demo`` does), into ``runs/results/`` (git-ignored). Each run directory is resumed, so a rerun reuses what is
stored and only regenerates the page. Every number on the page is computed by the suites' own table code
(``sleight.tables.render_runs``, ``quote.tables.summarise``, ``owmi.summary.SQL``, ``owmi score``) and saved
beside the page as ``docs/results/results.json``; ``results_page.py`` only formats that file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import io
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = ("paper", "cpu-small")
JUDGE = "embedded"  # the one juror every Sleight of Word run is judged by (as in `tamperbench demo`)


def _page_module():
    spec = importlib.util.spec_from_file_location("results_page", Path(__file__).with_name("results_page.py"))
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@dataclass
class Plan:
    """What one size runs: the CLI steps in order and the run directories each section is built from."""

    size: str
    steps: list[list[str]] = field(default_factory=list)
    sleight: list[str] = field(default_factory=list)
    quote: list[str] = field(default_factory=list)
    owmi: list[str] = field(default_factory=list)
    anchors: list[str] = field(default_factory=list)
    score: str = ""
    notes: list[str] = field(default_factory=list)


def _cli_options(*path: str) -> set[str]:
    """The option names a tamperbench command offers in this tree (``--readout`` lands after this tool)."""
    import typer.main

    from tamperbench.cli import app

    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    return {o for p in cmd.params for o in getattr(p, "opts", [])}


def installable_models() -> tuple[list[str], list[str]]:
    """The models this tamperbench can install and load, and a note for each one it cannot."""
    models, notes = ["embedded"], []
    try:
        from tamperbench.models.installable import MODELS, installed  # type: ignore[import-not-found]
    except ImportError:
        return models, ["gemma3-270m: this tamperbench has no `tamperbench models install`; embedded model only."]
    for name, model in MODELS.items():
        if name == "embedded":
            continue
        if installed(model):
            models.append(name)
        else:
            notes.append(f"{name}: not installed here (`tamperbench models install {name}`); left out.")
    return models, notes


def plan(size: str, root: Path, models: list[str], notes: list[str], owmi_options: set[str],
         kp_options: set[str]) -> Plan:
    """The steps of ``size`` over ``models``; run directories under ``root`` are named by what they hold,
    so the two sizes share a run where they run the same thing."""
    if size not in SIZES:
        raise SystemExit(f"error: --size: '{size}' is not one of {', '.join(SIZES)}")
    p = Plan(size, notes=list(notes))
    sleight_models = ["embedded"] if size == "paper" else models  # the paper preset on one model: ~1.5 h
    preset = "paper" if size == "paper" else "quick"
    for m in sleight_models:
        run = str(root / f"sleight-{preset}-{m}")
        p.sleight.append(run)
        budget = [] if size == "paper" else ["--max-new-tokens", "64"]  # 64: the demo's; default 160
        p.steps += [["sleight", "run", "--model", m, "--preset", preset, "--out", run],
                    ["judge", "run", run, "--judge", JUDGE, *budget]]
    sampling = ["--repeats", "5", "--temperature", "0.7"] if size == "paper" else []
    for m in models:
        run = str(root / ("quote-standard-" + ("r5-t0.7-" if sampling else "") + m))
        p.quote.append(run)
        p.steps.append(["quote", "run", "--model", m, "--preset", "standard", "--arm", "both", *sampling, "--out", run])
    readout = ["--readout", "choice"] if "--readout" in owmi_options else []
    if not readout:
        p.notes.append("OWMI: this tamperbench has no `--readout choice` (token-level read-out); the reports are "
                       "generated text, parsed.")
    run = str(root / ("owmi-quick-" + ("choice-" if readout else "") + "embedded"))
    p.owmi.append(run)
    p.steps.append(["owmi", "run", "--preset", "quick", "--model", "embedded", *readout, "--out", run])
    kp = "full" if size == "paper" else "test"
    anchor = str(root / f"owmi-known-positive-{kp}-embedded")
    p.anchors.append(anchor)
    check = []  # Section 7.2's check: the adapted model through owmi run beside its base
    if "--check" in kp_options:
        check = ["--check", "--readout", "choice"] + ([] if size == "cpu-small" else
                                                     ["--readout", "generated", "--readout", "constrained"])
    else:
        p.notes.append("OWMI: this tamperbench has no `owmi known-positive --check`; the anchor's held-out check only.")
    p.steps.append(["owmi", "known-positive", "--model", "embedded", "--preset", kp, *check, "--out", anchor])
    p.score = str(root / size / "owmi-score")
    p.steps.append(["owmi", "score", *p.owmi, *p.anchors, "--out", p.score])
    return p


def execute(p: Plan) -> None:
    """Run every step through the typer app; each resumes what its run directory already holds."""
    from rich.console import Console
    from rich.rule import Rule

    from tamperbench.cli import app

    console = Console()
    for argv in p.steps:
        console.print(Rule(f"tamperbench {' '.join(argv)}"))
        app(argv, standalone_mode=False)


def _quiet():
    from rich.console import Console

    return Console(file=io.StringIO(), width=200)


def collect_sleight(runs: list[str], out_dir: Path) -> dict | None:
    from tamperbench.sleight.tables import TITLES, render_runs
    from tamperbench.store import RunStore

    runs = [r for r in runs if (Path(r) / "spec.json").is_file()]
    if not runs:
        return None
    stores = [RunStore.open_existing(r, read_only=True) for r in runs]
    try:
        return {**render_runs(stores, _quiet(), "default", out_dir), "titles": TITLES}
    finally:
        for s in stores:
            s.close()


def collect_quote(runs: list[str]) -> dict | None:
    from tamperbench.quote.tables import load_rows, summarise, to_markdown

    runs = [r for r in runs if (Path(r) / "spec.json").is_file()]
    if not runs:
        return None
    summary = summarise(load_rows([Path(r) for r in runs]))
    return {"runs": runs, "summary": summary, "markdown": to_markdown(summary)}


def collect_owmi(runs: list[str], anchors: list[str], score_dir: str) -> dict | None:
    from tamperbench.owmi.score.tables import SQL
    from tamperbench.store import RunStore

    out: dict = {"runs": []}
    for run in runs:
        if not (Path(run) / "spec.json").is_file():
            continue
        with RunStore.open_existing(run, read_only=True) as store:
            cols = [d[0] for d in store.con.execute(SQL).description]
            rows = [dict(zip(cols, r)) for r in store.con.execute(SQL).fetchall()]
            spec = {k: store.spec_dict.get(k) for k in ("readout", "seeds", "models")}
        out["runs"].append({"run": run, "spec": spec, "conditions": rows})
    checks = [Path(a) / "known_positive_check.md" for a in anchors]
    out["positive_check_md"] = "\n".join(c.read_text() for c in checks if c.is_file()) or None
    score_md = Path(score_dir) / "owmi_score.md"
    out["score_md"] = score_md.read_text() if score_md.is_file() else None
    score_json = Path(score_dir) / "owmi_score.json"
    if score_json.is_file():  # the forest plots' rows: per model, per detection cell (owmi.site_forest)
        from tamperbench.owmi.score.site_forest import forest_rows

        out["forest"] = forest_rows(json.loads(score_json.read_text()))
    return out if out["runs"] else None


def machine(command: str) -> dict:
    import torch

    import tamperbench

    def git(*args: str) -> str:
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else "unknown"

    return {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "command": command,
            "commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--", "src", "tools")),
            "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version(), "platform": f"{platform.system()} {platform.machine()}",
            "tamperbench": tamperbench.__version__}


def collect(p: Plan, command: str, work: Path) -> dict:
    """Everything the page shows, computed by the suites' own table code from the run directories."""
    return {"size": p.size, "machine": machine(command), "notes": p.notes,
            "steps": [" ".join(["tamperbench", *s]).replace(f"{ROOT}/", "") for s in p.steps],
            "sleight": collect_sleight(p.sleight, work / "sleight-tables"),
            "quote": collect_quote(p.quote), "owmi": collect_owmi(p.owmi, p.anchors, p.score)}


def write_page(data: dict, docs: Path) -> Path:
    """``docs/results.md``, ``docs/results/results.json`` and the figures, from ``data`` alone."""
    page = _page_module()
    fig_dir = docs / "results"
    fig_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=1, sort_keys=True, default=str).replace(f"{ROOT}/", "")  # paths as in the repo
    (fig_dir / "results.json").write_text(text + "\n")
    data = json.loads(text)
    figures = page.figures(data, fig_dir)
    out = docs / "results.md"
    out.write_text(page.render(data, figures))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="paper", help=f"one of {', '.join(SIZES)} (default: paper)")
    ap.add_argument("--runs", type=Path, default=ROOT / "runs" / "results", help="where the run directories live")
    ap.add_argument("--docs", type=Path, default=ROOT / "docs", help="where results.md is written")
    ap.add_argument("--page-only", action="store_true", help="rebuild the page from the stored runs; run nothing")
    args = ap.parse_args(argv)
    models, notes = installable_models()
    p = plan(args.size, args.runs, models, notes, _cli_options("owmi", "run"), _cli_options("owmi", "known-positive"))
    if not args.page_only:
        from tamperbench.errors import UserError

        try:
            execute(p)
        except UserError as err:  # e.g. a run directory that holds an older spec: one line, exit 2
            print(f"error: {err}", file=sys.stderr)
            return 2
    command = " ".join(["python tools/results.py", *(sys.argv[1:] if argv is None else argv)])
    print(f"wrote {write_page(collect(p, command, args.runs / args.size), args.docs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
