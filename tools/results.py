"""``make results``: run the suites' presets on the installable models, then regenerate ``docs/results.md``
and its figures (``docs/results/*.svg``) from those runs.

Two sizes (``--size``):

- ``paper`` (``make results``, the full size): Sleight of Word ``--preset paper`` (10,100 trials a model) on
  every installable model, scored by the rule-based evidence detector (``judge evidence``: no real judge model
  runs on a CPU, so the jury columns stay empty and say why); Exact Words ``standard`` with ``--sampling paper``
  and three repeats, both arms; OWMI ``standard`` under the ``choice`` and ``constrained`` read-outs; the
  known-positive anchor's ``full`` preset with its ``--check``; ``owmi score`` over all of them. The papers' own
  numbers (``results_papers.py``) stand beside ours. Many hours on 2 cores.
- ``cpu-small`` (``make results RESULTS=cpu-small``): Sleight of Word ``quick`` and Exact Words ``standard``
  (greedy) on every installable model, judged by the embedded model as the one juror, OWMI ``quick`` and the
  known-positive anchor's ``test`` preset with its ``--check`` (choice read-out, 3 items): about 15-20 minutes.

Every step is the CLI command a user would type, run in-process through the typer app (as ``tamperbench
demo`` does), into ``runs/results/`` (committed: a clone resumes them). Each run directory is resumed; a step
whose files hold what they held when it last finished (size and sha256, in ``runs/results/SIZE/steps.json``,
committed beside the runs) is skipped, in a clone too, and a run another process is still writing
is left to it and shown in progress with its count. A run directory that holds an older spec is refused in one
line. Every number on the page is computed by the suites' own code (``results_collect.py``) from copies of the
run databases taken at page time, and saved beside the page as ``docs/results/results.json``;
``results_page.py`` and ``results_page_compare.py`` only format that file; ``results_scale.py`` adds the scale
evidence (records and their timestamps, and the process logs given with ``--logs``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = ("paper", "cpu-small")
JUDGE = "embedded"  # the one juror of the small size's Sleight of Word runs (as in `tamperbench demo`)
QUOTE_REPEATS = "3"  # Exact Words at the paper size: sampled as the paper (temperature 1.0), three repeats


def _load(name: str):
    """A sibling module of this tool (tools/ is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _page_module():
    return _load("results_page")


def _collect_module():
    return _load("results_collect")


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


def installable_models(root: Path | None = None) -> tuple[list[str], list[str]]:
    """The models this tamperbench can install and load, and a note for each one it cannot. A model not
    installed here whose runs are stored under ``root`` stays in the plan: its finished steps are skipped by
    the step state and the page shows its runs; a step that would need it is skipped with the install command
    (``execute``)."""
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
        elif root is not None and any(root.glob(f"*-{name}")):
            models.append(name)
            notes.append(f"{name}: not installed here; its stored runs are shown, and a step that would need the "
                         f"model is skipped (`tamperbench models install {name}`).")
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
    preset = "paper" if size == "paper" else "quick"
    for m in models:
        run = str(root / f"sleight-{preset}-{m}")
        p.sleight.append(run)
        p.steps.append(["sleight", "run", "--model", m, "--preset", preset, "--out", run])
        if size == "paper":  # no real judge model runs on a CPU: the rule-based evidence detector instead
            p.steps.append(["judge", "evidence", run])
        else:
            p.steps.append(["judge", "run", run, "--judge", JUDGE, "--max-new-tokens", "64"])  # 64: the demo's
    sampling = ["--sampling", "paper", "--repeats", QUOTE_REPEATS] if size == "paper" else []
    for m in models:
        run = str(root / ("quote-standard-" + (f"paper-r{QUOTE_REPEATS}-" if sampling else "") + m))
        p.quote.append(run)
        p.steps.append(["quote", "run", "--model", m, "--preset", "standard", "--arm", "both", *sampling, "--out", run])
    has_readout = "--readout" in owmi_options
    if not has_readout:
        p.notes.append("OWMI: this tamperbench has no `--readout choice` (token-level read-out); the reports are "
                       "generated text, parsed.")
    owmi_preset = "standard" if size == "paper" else "quick"
    for readout in (("choice", "constrained") if size == "paper" else ("choice",)) if has_readout else ("",):
        # paper: `choice` on every model, `constrained` (grammar-constrained generation, about 3x choice's wall
        # time on the embedded model: the scale table) on the embedded model only; cpu-small: the embedded model
        for m in models if (size == "paper" and readout == "choice") else ["embedded"]:
            run = str(root / "-".join(x for x in ("owmi", owmi_preset, readout, m) if x))
            p.owmi.append(run)
            p.steps.append(["owmi", "run", "--preset", owmi_preset, "--model", m,
                            *(["--readout", readout] if readout else []), "--out", run])
    if size == "paper" and has_readout and len(models) > 1:
        others = [m for m in models if m != "embedded"]
        p.notes.append(
            "OWMI: the `choice` read-out runs on every installable model; `constrained` on the embedded model only "
            "(its wall time there is about three times `choice`'s, in the scale table below); add it for another "
            "model with " + "; ".join(f"`tamperbench owmi run --preset standard --model {m} --readout constrained "
                                      f"--out {root}/owmi-standard-constrained-{m}`" for m in others)
            + ", then rerun `owmi score` with that run among its inputs.")
    kp = "full" if size == "paper" else "test"
    anchor = str(root / f"owmi-known-positive-{kp}-embedded")
    p.anchors.append(anchor)
    check = []  # Section 7.2's check: the adapted model through owmi run beside its base
    if "--check" in kp_options:
        check = ["--check", "--readout", "choice"] + (["--items", "3"] if size == "cpu-small" else [])
    else:
        p.notes.append("OWMI: this tamperbench has no `owmi known-positive --check`; the anchor's held-out check only.")
    p.steps.append(["owmi", "known-positive", "--model", "embedded", "--preset", kp, *check, "--out", anchor])
    p.score = str(root / size / "owmi-score")
    p.steps.append(["owmi", "score", *p.owmi, *p.anchors, "--out", p.score])
    return p


def _outputs(argv: list[str]) -> list[str]:
    """The run directories a step writes (its --out, or judge's RUN) and, for owmi score, the runs it reads."""
    if argv[:2] == ["judge", "evidence"]:
        return [argv[2]]
    outs = [argv[i + 1] for i, a in enumerate(argv) if a == "--out"]
    return ([a for a in argv[2:] if not a.startswith("-") and a not in outs][: len(argv)] + outs
            if argv[:2] == ["owmi", "score"] else outs)


def log_name(argv: list[str]) -> str:
    """The name a step's process logs go under in ``--logs``: its run directory's name (the page reads
    RUN.time, RUN.rss, RUN.kills.txt by that name), ``RUN.evidence`` for the evidence detector."""
    outs = _outputs(argv)
    if argv[:2] == ["judge", "evidence"]:
        return Path(outs[0]).name + ".evidence"
    return Path(outs[-1]).name


def fingerprint(argv: list[str], root: Path) -> list:
    """Size and sha256 of every database and score file under the step's directories, each named relative to
    ``root``: content, not modification times, so a clone of the committed runs (git writes every file anew)
    finds its steps done where the files are the ones the state names."""
    out = []
    for d in _outputs(argv):
        for f in sorted(Path(d).rglob("*")) if Path(d).is_dir() else []:
            if f.name.startswith(("records.duckdb", "owmi_score.", "known_positive_check.")) and f.is_file():
                with f.open("rb") as fh:
                    digest = hashlib.file_digest(fh, "sha256").hexdigest()
                out.append([_relative(str(f), root), f.stat().st_size, digest])
    return out


def _relative(path: str, root: Path) -> str:
    """``path`` relative to ``root`` where it lies under it (the state file must hold in another checkout)."""
    if os.sep not in path:  # an option or a model name, never a run directory
        return path
    full = Path(path).resolve()
    return os.path.relpath(full, root) if full.is_relative_to(root) else path


def step_key(argv: list[str], root: Path) -> str:
    """A step as the state file names it: its command with the run directories relative to ``root``."""
    return " ".join(_relative(a, root) for a in argv)


def _absent_model(argv: list[str], installed_names: set[str] | None) -> str | None:
    """The model a step loads, where this machine has not installed it (``None``: every model counts as
    installed)."""
    if installed_names is None or "--model" not in argv:
        return None
    name = argv[argv.index("--model") + 1]
    return None if name in installed_names else name


def execute(p: Plan, state_file: Path, root: Path | None = None, installed_names: set[str] | None = None) -> list[str]:
    """Run every step through the typer app; each resumes what its run directory already holds. A step whose
    directories are unchanged since the last pass finished it is skipped; a run another process is writing
    is left to that process (the page shows it as in progress). ``root`` (default: the state file's folder's
    parent, the runs folder) is what paths in the state are relative to. Returns what was skipped and why."""
    from rich.console import Console
    from rich.rule import Rule

    from tamperbench.cli import app

    collect = _collect_module()
    root = (root or state_file.parent.parent).resolve()
    done = json.loads(state_file.read_text()) if state_file.is_file() else {}
    console, skipped = Console(), []
    for argv in p.steps:
        step = " ".join(argv)
        key = step_key(argv, root)
        busy = [d for d in _outputs(argv) if collect.writer_holds(Path(d))]
        if busy:
            skipped.append(f"`tamperbench {step}`: skipped, {', '.join(busy)} is being written by another process")
            continue
        missing = [d for d in _outputs(argv)[:-1] if not (Path(d) / "spec.json").is_file()] \
            if argv[:2] == ["owmi", "score"] else []
        if missing:
            skipped.append(f"`tamperbench {step}`: skipped, {', '.join(missing)} not run yet")
            continue
        if done.get(key) == fingerprint(argv, root) and done.get(key):
            continue  # unchanged since this step last finished
        absent = _absent_model(argv, installed_names)
        if absent:
            skipped.append(f"`tamperbench {step}`: skipped, {absent} is not installed here "
                           f"(`tamperbench models install {absent}`)")
            continue
        console.print(Rule(f"tamperbench {step}"))
        app(argv, standalone_mode=False)
        done[key] = fingerprint(argv, root)
        state_file.parent.mkdir(parents=True, exist_ok=True)
        state_file.write_text(json.dumps(done, indent=1))
    for argv in p.steps:  # a later step (judge evidence) may have written into an earlier step's run
        if step_key(argv, root) in done:
            done[step_key(argv, root)] = fingerprint(argv, root)
    if done:
        state_file.write_text(json.dumps(done, indent=1))
    return skipped


def machine(command: str) -> dict:
    import torch

    import tamperbench

    def git(*args: str) -> str:
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else "unknown"

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").is_file() else ""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30 if hasattr(os, "sysconf") else None
    return {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "command": command,
            "cpu_model": cpu or "unknown", "memory_gib": None if mem is None else round(mem, 1),
            "commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--", "src", "tools")),
            "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version(), "platform": f"{platform.system()} {platform.machine()}",
            "tamperbench": tamperbench.__version__}


def collect(p: Plan, command: str, work: Path, logs: Path | None = None, skipped: list[str] | None = None) -> dict:
    """Everything the page shows, computed by the suites' own table code from copies of the run directories."""
    import tempfile

    c, scale = _collect_module(), _load("results_scale")
    papers = _load("results_papers")
    with tempfile.TemporaryDirectory(prefix="tb-results-") as tmp_name:
        tmp = Path(tmp_name)
        data = {"size": p.size, "machine": machine(command), "notes": p.notes + (skipped or []),
                "steps": [" ".join(["tamperbench", *s]) for s in p.steps],
                "sleight": c.collect_sleight(p.sleight, work / "sleight-tables", tmp),
                "quote": c.collect_quote(p.quote, tmp), "owmi": c.collect_owmi(p.owmi, p.anchors, p.score, tmp)}
        runs = p.sleight + p.quote + p.owmi + [str(Path(a) / "run-choice") for a in p.anchors]
        copies = {r: c.snapshot(Path(r), tmp / "scale" / str(i)) for i, r in enumerate(runs)
                  if (Path(r) / "spec.json").is_file() and (Path(r) / "records.duckdb").is_file()}
        data["scale"] = [scale.evidence(r, copies.get(r), logs) for r in runs]
    if p.size == "paper":
        data["papers"] = {k: getattr(papers, k) for k in dir(papers) if k.isupper()}
    return data


def repo_paths(text: str, runs: Path | None) -> str:
    """Paths as in the repository (runs/results/...): this checkout's prefix removed, and the prefix of another
    checkout where a stored record holds one (an adapter's model source names the folder that trained it)."""
    for base in {f"{ROOT}/", *([f"{runs.resolve().parent.parent}/"] if runs else [])}:
        text = text.replace(base, "")
    if runs is not None and runs.resolve().is_relative_to(ROOT):
        rel = runs.resolve().relative_to(ROOT).as_posix()
        text = re.sub(r"(?:/[^/\s\"'`:,]+)+/(?=" + re.escape(rel) + "/)", "", text)
    return text


def write_page(data: dict, docs: Path, runs: Path | None = None) -> Path:
    """``docs/results.md``, ``docs/results/results.json`` and the figures, from ``data`` alone."""
    page = _page_module()
    fig_dir = docs / "results"
    fig_dir.mkdir(parents=True, exist_ok=True)
    for old in fig_dir.glob("*.svg"):  # figures of an earlier page (a forest plot for a model no longer run)
        old.unlink()
    text = json.dumps(data, indent=1, sort_keys=True, default=str)
    text = repo_paths(text, runs)
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
    ap.add_argument("--print-steps", action="store_true",
                    help="print the steps, one a line: the log name (the run directory's name; RUN.evidence for the "
                         "evidence detector), a tab, then the tamperbench arguments tab-separated; run nothing "
                         "(tools/results_background.sh runs them)")
    ap.add_argument("--logs", type=Path, default=None,
                    help="process logs named after the run directories (RUN.time or RUN.err from /usr/bin/time -v, "
                         "RUN.rss, RUN.kills.txt): wall, CPU, memory and kill/resume evidence on the page "
                         "(default: RUNS/logs where that folder exists)")
    args = ap.parse_args(argv)
    for name in ("runs", "docs", "logs"):  # under the working directory: relative, so that what the steps write
        path = getattr(args, name)  # (score files, tables) names runs/results/... on every checkout
        if path is not None and path.resolve().is_relative_to(Path.cwd().resolve()):
            setattr(args, name, path.resolve().relative_to(Path.cwd().resolve()))
    if args.logs is None and (args.runs / "logs").is_dir():
        args.logs = args.runs / "logs"
    models, notes = installable_models(args.runs)
    p = plan(args.size, args.runs, models, notes, _cli_options("owmi", "run"), _cli_options("owmi", "known-positive"))
    if args.print_steps:
        for argv in p.steps:
            print("\t".join([log_name(argv), *argv]))
        return 0
    if args.logs is not None and not args.logs.is_dir():
        print(f"error: --logs: {args.logs} is not a directory", file=sys.stderr)
        return 2
    from tamperbench.errors import UserError

    skipped: list[str] = []
    try:
        if not args.page_only:
            skipped = execute(p, args.runs / args.size / "steps.json", installed_names=set(installable_models()[0]))
        command = " ".join(["python tools/results.py", *(sys.argv[1:] if argv is None else argv)])
        data = collect(p, command, args.runs / args.size, args.logs, skipped)
    except UserError as err:  # e.g. a run directory that holds an older spec: one line, exit 2
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {write_page(data, args.docs, args.runs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
