"""``tamperbench sleight run|table``: the Sleight of Word benchmark from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from tamperbench.cli.options import BatchSizeOpt, ChatTemplateOpt, DeviceOpt, DtypeOpt, ModelOpt, NewOpt, SeedOpt
from tamperbench.errors import UserError

app = typer.Typer(help="Sleight of Word: swap a word in the model's own answer as it writes; does it notice?",
                  no_args_is_help=True, pretty_exceptions_enable=False)


@app.command("run")
def run_cmd(
    out: Path = typer.Option(..., "--out", help="Run directory (created; resumed when it holds the same spec)."),
    model: ModelOpt = "embedded",
    preset: str = typer.Option("quick", "--preset", help="quick (a few questions/words, 96 tokens), demo (2 questions, 2 words, 64 tokens) or paper."),
    questions: Optional[int] = typer.Option(None, "--questions", help="Use this many questions."),
    words: Optional[int] = typer.Option(None, "--words", help="Use this many substitutions (Mandela effect first)."),
    trigger: Optional[list[str]] = typer.Option(None, "--trigger", help="Trigger word; repeat for several (default: the)."),
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", help="Token budget per answer."),
    keep_topk: bool = typer.Option(False, "--keep-topk", help="Also store the top-20 ids and log-probs per token."),
    seed: SeedOpt = 0,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = None,
    batch_size: BatchSizeOpt = None,
    chat_template: ChatTemplateOpt = None,
    detector_rules: str = typer.Option("reference", "--detector-rules",
                                       help="reference (the reference code's trigger rules, which produced the "
                                            "paper's numbers) or appendix-c (tamperbench v1's reading of the "
                                            "paper's Appendix C)."),
    replacement_case: Optional[str] = typer.Option(None, "--replacement-case",
                                                   help="first-letter (the reference's: THE -> Scarf) or pattern "
                                                        "(follow the trigger's case: THE -> SCARF); default: "
                                                        "first-letter under reference rules, pattern under "
                                                        "appendix-c."),
    new: NewOpt = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print trials, tokens and an ETA; decode and store nothing."),
) -> None:
    """Run (or resume) the benchmark, then print Tables 1-3."""
    from tamperbench.sleight.spec import build_spec
    from tamperbench.sleight.runner import run
    from tamperbench.sleight.tables import render
    from tamperbench.store import RunStore

    from tamperbench.models.templating import resolve_chat_template

    resolve_chat_template(chat_template)  # a bad template file: one line, before any run directory exists
    spec = build_spec(model=model, preset=preset, questions=questions, words=words, triggers=trigger,
                      max_new_tokens=max_new_tokens, keep_topk=keep_topk, seed=seed, device=device, dtype=dtype,
                      batch_size=batch_size, chat_template=chat_template, detector_rules=detector_rules,
                      replacement_case=replacement_case)
    if dry_run:
        from tamperbench.runs.driver import dry_run as driver_dry_run
        from tamperbench.sleight.runner import SUITE

        driver_dry_run(SUITE, spec, out, echo=Console().print)
        return
    err = Console(stderr=True)
    rep = run(spec, out, new=new, console=err)
    err.print(f"{rep.trials_written} trials written, {rep.trials_skipped} already stored, {rep.swaps} swaps, "
              f"{rep.tokens} tokens in {rep.seconds:.1f}s -> {out}")
    with RunStore.open_existing(out, read_only=True) as store:
        render(store, Console())


def render_run(run_dir: Path, console: Console) -> None:
    """The registry's table renderer: print Tables 1-3 of a run and save them there."""
    from tamperbench.sleight.tables import render
    from tamperbench.store import RunStore

    with RunStore.open_existing(run_dir, read_only=True) as store:
        render(store, console)


@app.command("table")
def table_cmd(run_dirs: list[Path] = typer.Argument(..., help="One sleight run directory, or several (one model "
                                                               "each) to pool into one table."),
              layout: str = typer.Option("default", "--layout",
                                         help="default (intervals, extra columns) or paper (the paper's columns "
                                              "and rounding)."),
              out: Path | None = typer.Option(None, "--out", help="Where tables.md and tables.json go (default: the "
                                                                  "run; required with several runs).")) -> None:
    """Print Tables 1-3 of a run (or of several runs pooled, as the paper's tables pool its models) and
    save them (tables.md, tables.json)."""
    from contextlib import ExitStack

    from tamperbench.sleight.records import TRIALS_TABLE
    from tamperbench.sleight.tables import render_runs
    from tamperbench.store import RunStore

    if len(run_dirs) > 1 and out is None:
        raise UserError("--out: required with several runs (the directory for the pooled tables.md and tables.json)")
    if len({d.resolve() for d in run_dirs}) != len(run_dirs):
        raise UserError("RUN_DIRS: the same run is given twice")
    with ExitStack() as stack:
        stores = []
        for d in run_dirs:
            store = stack.enter_context(RunStore.open_existing(d, read_only=True))
            if store.spec_dict.get("suite") != "sleight" or not store.has_table(TRIALS_TABLE):
                raise UserError(f"{d}: not a sleight run (no {TRIALS_TABLE} table)")
            stores.append(store)
        render_runs(stores, Console(), layout=layout, out_dir=out)


def main() -> None:  # pragma: no cover - for `python -m tamperbench.sleight.cli`
    import sys

    try:
        app(standalone_mode=False)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)


if __name__ == "__main__":  # pragma: no cover
    main()
