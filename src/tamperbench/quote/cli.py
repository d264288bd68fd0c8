"""``tamperbench quote ...``: run the suite, print its tables, export items, score outside responses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from tamperbench.cli.options import BatchSizeOpt, ChatTemplateOpt, DeviceOpt, DtypeOpt, ModelOpt, NewOpt, SeedOpt
from tamperbench.errors import UserError
from tamperbench.safeio.files import atomic_write


def _console() -> Console:
    """Wide enough for the tables when stdout is a file or pipe (rich assumes 80 columns there)."""
    probe = Console()
    return probe if probe.is_terminal else Console(width=160)


app = typer.Typer(help="Exact Words: does a model copy a sentence verbatim, planted errors and all?",
                  no_args_is_help=True)


@app.command()
def run(
    out: Path = typer.Option(..., "--out", help="Run directory (created; resumed if it holds the same spec)."),
    model: ModelOpt = "embedded",
    arm: str = typer.Option("both", "--arm", help="plain | strict | both"),
    preset: str = typer.Option("standard", "--preset", help="standard | depth | colon | code"),
    sampling: str = typer.Option("greedy", "--sampling", help="greedy (default) or paper: sample as the paper did "
                                 "(provider-default temperature, 1.0 unless --temperature; one sample per prompt "
                                 "unless --repeats, which adds the spread over repeats)."),
    repeats: Optional[int] = typer.Option(None, "--repeats", help="Repeats per item and arm (1, also under --sampling "
                                          "paper as the paper; needs --temperature > 0 when > 1)."),
    temperature: Optional[float] = typer.Option(None, "--temperature", help="0 = greedy (default); > 0 samples (1.0 "
                                                "under --sampling paper)."),
    seed: SeedOpt = 0,
    max_new_tokens: int = typer.Option(96, "--max-new-tokens",
                                       help="Longest gold is 45 tokens; 96 leaves room for lead-ins and glued neighbours."),
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = None,
    batch_size: BatchSizeOpt = None,
    items: Optional[str] = typer.Option(None, "--items", help="Comma-separated item ids (default: all)."),
    sample_seed: str = typer.Option("trial", "--sample-seed", help="How a sampled answer is seeded: trial (by --seed "
                                    "and its item, arm and repeat: a subset or another machine samples the same "
                                    "answers) or position (its place in its decoding call: runs sampled before "
                                    "this option)."),
    chat_template: ChatTemplateOpt = None,
    new: NewOpt = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print trials, tokens and an ETA; decode and store nothing."),
) -> None:
    """Ask the model every item of a preset under one or both arms; score and store each response."""
    from tamperbench.quote.runner import QuoteRunSpec, run_quote
    from tamperbench.spec_base import build_spec

    if arm not in ("plain", "strict", "both"):
        raise UserError(f"--arm must be plain, strict or both; got {arm!r}")
    arms = ["plain", "strict"] if arm == "both" else [arm]
    from tamperbench.models.templating import resolve_chat_template

    resolve_chat_template(chat_template)  # a bad template file: one line, before any run directory exists
    spec = build_spec(QuoteRunSpec, model=model, preset=preset, arms=arms, sampling=sampling, repeats=repeats,
                      temperature=temperature, seed=seed, max_new_tokens=max_new_tokens, device=device, dtype=dtype,
                      batch_size=batch_size, chat_template=chat_template, sample_seed=sample_seed,
                      item_ids=[i.strip() for i in items.split(",") if i.strip()] if items is not None else None)
    if dry_run:
        from tamperbench.quote.runner import SUITE
        from tamperbench.runs.driver import dry_run as driver_dry_run

        driver_dry_run(SUITE, spec, out, echo=_console().print)
        return
    store = run_quote(spec, out, new=new)
    store.close()
    render_run(out, _console())


def render_run(run_dir: Path, console: Console) -> None:
    """The registry's table renderer: print a run's tables and save them in the run directory."""
    from tamperbench.quote.tables import load_rows, render, summarise, write_tables

    summary = summarise(load_rows([run_dir]))
    render(summary, console)
    j, m = write_tables(summary, run_dir)
    typer.echo(f"saved {j} and {m}")


@app.command()
def table(
    runs: list[Path] = typer.Argument(..., help="One or more quote run directories."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where to save quote_table.json/.md "
                                       "(default: the run directory when exactly one is given)."),
    top: int = typer.Option(10, "--top", help="How many hardest items to list."),
    taxonomy: str = typer.Option("ours", "--taxonomy", help="ours (fine classes), paper (the paper's five classes; "
                                 "mapping in quote/data/README.md) or paper-period-truncated (paper, an invented "
                                 "terminal period counted as truncated)."),
) -> None:
    """Faithful rate per model and arm, failure taxonomy and hardest items of stored runs."""
    from tamperbench.quote.tables import load_rows, render, summarise, write_tables
    from tamperbench.quote.taxonomy import check_taxonomy

    check_taxonomy(taxonomy)

    rows = load_rows(runs)
    if not rows:
        raise UserError(f"{', '.join(map(str, runs))}: no quote trials stored")
    summary = summarise(rows, top=top, taxonomy=taxonomy)
    console = _console()
    render(summary, console)
    target = out if out is not None else (runs[0] if len(runs) == 1 else None)
    if target is None:
        typer.echo("several runs given and no --out: tables printed, not saved")
        return
    j, m = write_tables(summary, target)
    typer.echo(f"saved {j} and {m}")


@app.command()
def rescore(run_dir: Path = typer.Argument(..., help="A quote run directory.")) -> None:
    """Re-score the stored responses of a run with the current scorer (no generation)."""
    from tamperbench.quote.runner import rescore_run

    n, changed = rescore_run(run_dir)
    typer.echo(f"re-scored {n} stored responses in {run_dir}: {changed} verdict(s) changed")


@app.command()
def items(
    out: Path = typer.Option(..., "--out", help="JSONL file to write."),
    preset: str = typer.Option("standard", "--preset", help="standard | depth | colon | code"),
) -> None:
    """Export a preset's items with their documents so responses can be collected anywhere."""
    from tamperbench.quote.items import build_prompt, document_for, load_items

    rows = []
    for it in load_items(preset):
        doc = document_for(it)
        rows.append({"id": it.id, "preset": it.preset, "document_id": it.doc_id, "unit": it.unit,
                     "instruction": it.instruction("plain"), "strict_instruction": it.instruction("strict"),
                     "gold": it.gold, "planted_span": it.planted.span if it.planted else None,
                     "corrected_form": it.planted.corrected if it.planted else None,
                     "planted_kind": it.planted.kind if it.planted else None,
                     "document": doc.text, "prompt_plain": build_prompt(it, "plain"),
                     "prompt_strict": build_prompt(it, "strict")})
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    typer.echo(f"wrote {len(rows)} {preset} items to {out}", err=True)


@app.command()
def score(
    responses: Path = typer.Argument(..., help="JSONL with item_id and response on each line."),
    out: Optional[Path] = typer.Option(None, "--out", help="Verdicts JSONL (default: stdout)."),
    taxonomy: str = typer.Option("ours", "--taxonomy", help="ours, or paper / paper-period-truncated: add each "
                                 "line's paper class (paper_class) beside our class and sub-label."),
) -> None:
    """Score responses collected elsewhere; report each bad line on stderr and score the rest.

    Exit status 1 when any line was skipped (malformed JSON, unknown item id, missing fields).
    An empty response is scored (no_answer) and also reported, since it is usually a collection bug.
    """
    from tamperbench.quote.score_file import read_lines, score_lines
    from tamperbench.quote.taxonomy import check_taxonomy, is_paper, paper_class

    check_taxonomy(taxonomy)
    verdicts, problems, skipped = score_lines(read_lines(responses))  # not UTF-8 / unreadable: one line
    if is_paper(taxonomy):
        verdicts = [{"paper_class": paper_class(v["category"], v["sub_label"], v["evidence"], taxonomy),
                     "taxonomy": taxonomy, **v} for v in verdicts]
    for line_no, msg in problems:
        typer.echo(f"{responses}:{line_no}: {msg}", err=True)
    text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in verdicts)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, text)
    typer.echo(f"scored {len(verdicts)} line(s), skipped {skipped}" + (f", verdicts in {out}" if out else ""), err=True)
    if skipped:
        raise typer.Exit(1)
