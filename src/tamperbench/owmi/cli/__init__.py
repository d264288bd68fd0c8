"""``tamperbench owmi run``: Open-Weight Masked Introspection from the command line.

Heavy imports (torch, transformers) happen inside the command, so ``tamperbench --help`` stays fast.

The stdout console of the ``owmi`` commands (:func:`stdout_console`): rich fits tables and wraps
text to the console width, and a console writing to a pipe or a file has no terminal to measure, so
rich assumes 80 columns: ``owmi run > log`` cut the per-condition table's columns and wrapped long
lines. Written to a non-terminal, the console is ``PIPE_WIDTH`` wide instead, so a table keeps every
column whole (a terminal keeps its own width). (``cli/console.py``, where it lived, still imports,
with a DeprecationWarning.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from tamperbench.errors import UserError

PIPE_WIDTH = 320


def stdout_console() -> Console:
    """The console a command prints its results to: the terminal's width, or ``PIPE_WIDTH`` when piped."""
    con = Console()
    return con if con.is_terminal else Console(width=PIPE_WIDTH)


app = typer.Typer(help="OWMI: intervene on internal objects; can the model report it beyond sham, random and observer?",
                  no_args_is_help=True, pretty_exceptions_enable=False)


@app.command("run")
def run_cmd(
    out: Path = typer.Option(..., "--out", help="Run directory (created; resumed when it holds the same spec)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Spec file (JSON); see examples/owmi_full.json."),
    preset: Optional[str] = typer.Option(None, "--preset", help="quick (2 built-in items, 2 seeds, 3 operator doses, all conditions) or demo (the same on 1 item)."),
    model: Optional[str] = typer.Option(None, "--model", help="With --preset: the model spec to test (default embedded)."),
    readout: Optional[str] = typer.Option(
        None, "--readout", help="How probe answers are read (overrides the spec's 'readout'): generated (decode the JSON "
        "answer; the paper's, the default), constrained (decode under the probe's JSON grammar; needs llguidance) or "
        "choice (a token-level read-out: score each probe's closed option set; decodes nothing; a row whose options carry under 10% of the probability is unscorable)."),
    new: bool = typer.Option(False, "--new", help="Discard what the run directory holds and start afresh."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print records, tokens and an ETA; run and store nothing."),
) -> None:
    """Run (or resume) an OWMI spec, then print the per-condition summary."""
    from tamperbench.owmi.protocol.records import READOUTS
    from tamperbench.owmi.run.spec import PRESETS, load_spec, parse_spec

    con = stdout_console()  # the results: the plan under --dry-run, else the summary
    if (config is None) == (preset is None):
        raise UserError("owmi run: give exactly one of --config FILE or --preset quick")
    if preset is not None and preset not in PRESETS:
        raise UserError(f"--preset: must be one of {', '.join(PRESETS)}; got {preset!r}")
    if model is not None and preset is None:
        raise UserError("--model: only with --preset (a config file names its models)")
    if readout is not None and readout not in READOUTS:
        raise UserError(f"--readout: must be one of {', '.join(READOUTS)}; got {readout!r}")
    spec = load_spec(config) if config is not None else PRESETS[str(preset)](**({"models": [model]} if model else {}))
    if readout is not None:
        spec = parse_spec({**spec.model_dump(mode="json"), "readout": readout}, "--readout")
    if dry_run:
        from tamperbench.owmi.run.runner import SUITE, validate
        from tamperbench.runs.driver import dry_run as driver_dry_run

        validate(spec)  # a model or object the run would refuse is refused by its plan too
        driver_dry_run(SUITE, spec, out, echo=con.print)
        return
    from tamperbench.owmi.run.runner import run
    from tamperbench.owmi.score.tables import render

    err = Console(stderr=True)
    rep = run(spec, out, new=new, console=err)
    err.print(f"{rep.written} records written, {rep.skipped_units} of {rep.units} units already stored, "
              f"{rep.seconds:.1f}s -> {out}")
    render(out, con)


@app.command("summary")
def summary_cmd(run_dir: Path = typer.Argument(..., help="An OWMI run directory.")) -> None:
    """Per track x scope x condition: runs, complete pairs with the intervention, parse rate, yes-rate, JS."""
    from tamperbench.owmi.score.tables import render

    render(run_dir, stdout_console())


# owmi score / probe / known-positive live in owmi/analysis (statistics helper); mounted here.
from tamperbench.owmi.cli.score import register as _register_analysis  # noqa: E402

_register_analysis(app)
from tamperbench.owmi.cli.sae import register as _register_sae  # noqa: E402

_register_sae(app)
