"""``owmi score``, ``owmi probe`` and ``owmi known-positive``, added to the ``owmi`` typer app.

``register(app)`` is called once from ``tamperbench/owmi/cli.py``; heavy imports stay inside the
commands so ``tamperbench --help`` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.owmi.cli.util import build_spec
from tamperbench.owmi.cli import stdout_console


def score_cmd(
    runs: list[Path] = typer.Argument(..., help="OWMI run directories and anchor directories (owmi probe / known-positive)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where to write owmi_score.{md,csv,json} (default: FIRST_RUN/score)."),
    boot: int = typer.Option(2000, "--boot", min=0, max=100000, help="Clustered-bootstrap replicates."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    dose_boot: int = typer.Option(100, "--dose-boot", min=0, max=10000, help="Replicates for the dose-response fit."),
    decay_level: float = typer.Option(0.95, "--decay-level", min=0.5, max=0.999,
                                      help="Confidence level of the temporal-decay (Eq. 19) intervals."),
    dose_model: str = typer.Option("simple", "--dose-model", help="simple: the simplified dose fit (default); paper: "
                                   "also the paper's hierarchical fit, Eq. 10-11 by NUTS (needs the [bayes] extra)."),
    recon_validation: Optional[Path] = typer.Option(
        None, "--recon-validation", help="JSON {raters, sample_size, threshold, agreement}: a human validation of the "
        "rule-scored reconstruction family (D.3). Without one no claim rests on reconstruction."),
) -> None:
    """Score runs: profile, detection, confidence, equivalence bound, anchors, claim verdicts."""
    from rich.markdown import Markdown

    from tamperbench.owmi.score.profile import score_runs
    from tamperbench.owmi.score.render import save, to_markdown

    from tamperbench.owmi.score.reconstruction import load_validation

    from tamperbench.store.distinct import distinct_runs

    if dose_model not in ("simple", "paper"):
        raise UserError(f"--dose-model: expected simple or paper, got {dose_model!r}")
    if dose_model == "paper":  # before the score: a missing extra is one line, not minutes later
        from tamperbench.owmi.score.dose_paper import require_extra

        require_extra()
    validation = load_validation(recon_validation) if recon_validation is not None else None
    from tamperbench.owmi.protocol.records import RUNS_TABLE
    from tamperbench.owmi.score.anchor_store import ANCHOR_TABLE

    # a run given twice, or a copy of one, is counted once; a copy is judged by the records scored (runs and
    # anchors), not by the impact-matching calibration a choice run and a constrained run of one spec share
    runs, notes = distinct_runs(runs, tables=(RUNS_TABLE, ANCHOR_TABLE))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    result = score_runs(runs, n_boot=boot, seed=seed, dose_boot=dose_boot, decay_level=decay_level,
                        recon_validation=validation)
    result["dose_model"] = dose_model
    if dose_model == "paper":
        from tamperbench.owmi.score.dose_paper import paper_ladders

        result["paper_ladders"] = paper_ladders(runs, seed=seed)
    if out is None:  # the default folder lies inside a run directory: never follow a link there
        from tamperbench.safeio.files import refuse_links

        refuse_links(Path(runs[0]), ("score",))
    paths = save(result, out or Path(runs[0]) / "score")
    text = to_markdown(result)
    con = Console()
    if con.is_terminal:
        con.print(Markdown(text))
    else:  # piped or redirected: the Markdown itself, unwrapped and unpadded
        print(text, end="")
    Console(stderr=True).print(f"saved: {', '.join(str(p) for p in paths.values())}")


def probe_cmd(
    out: Path = typer.Option(..., "--out", help="Anchor run directory (pass it to owmi score)."),
    model: str = typer.Option("embedded", "--model", "-m", help="Model spec."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or auto."),
    layer: Optional[int] = typer.Option(None, "--layer", help="Intervened resid_post layer (default: mid-depth)."),
    read_layers: Optional[str] = typer.Option(None, "--read-layers", help="Comma list (default: the site and every deeper layer)."),
    items: int = typer.Option(96, "--items", help="Prompts (each: one sham and one intervention pass)."),
    perm: int = typer.Option(200, "--perm", help="Label-shuffled refits per read-out layer."),
    operator: str = typer.Option("add", "--operator", help="The cell's operator: add, zero, scale, noise or replace (C.8: "
                                 "the probe reads the cell's own intervention)."),
    dose: float = typer.Option(8.0, "--dose", help="The operator's dose (add: norm of the added direction)."),
    seed: int = typer.Option(7, "--direction-seed", help="Seed of the added unit direction (noise: of the draw)."),
    concepts: Optional[str] = typer.Option(None, "--concepts", help="add: inject the engine's concept directions (comma "
                                           "list, cycled over the items) instead of a seeded random one."),
    new: bool = typer.Option(False, "--new", help="Replace an anchor run with a different spec."),
) -> None:
    """Linear-probe anchor: is the intervention linearly decodable at the site and downstream?"""
    from tamperbench.models import load_backend
    from tamperbench.owmi.score.anchor_store import save_anchor
    from tamperbench.owmi.controls.probe import ProbeSpec, describe_layer, run_probe_anchor

    reads = None
    if read_layers:
        try:
            reads = [int(x) for x in read_layers.split(",") if x.strip()]
        except ValueError:
            raise UserError(f"--read-layers: expected comma-separated integers, got {read_layers!r}") from None
    spec = build_spec(ProbeSpec, "probe", model=model, layer=layer, read_layers=reads, n_items=items, n_perm=perm,
                 dose=dose, direction_seed=seed, operator=operator,
                 concepts=[c.strip() for c in concepts.split(",") if c.strip()] if concepts else None)
    backend = load_backend(model, device=device)
    result = run_probe_anchor(backend, spec)
    save_anchor(out, spec, result, new=new)
    con = stdout_console()
    con.print(f"linear probe at {result['site']} ({result['train_items']} train / {result['test_items']} test items, "
              f"{spec.n_perm} label-shuffled refits; rule: {result['rule']})")
    for row in result["layers"]:
        con.print(f"  layer {row['read_layer']:>2}: {describe_layer(row)}; source rule (max |null| < 0.1, "
                  f"mis-specified) {'passes' if row.get('source_rule_pass') else 'fails'}")
    con.print(f"m_probe = {result['m_probe']:+.3f}; passes = {result['passes']}; "
              f"{result['seconds']} s; saved -> {out}")


def register(app: typer.Typer) -> None:
    app.command("score")(score_cmd)
    app.command("probe")(probe_cmd)
    from tamperbench.owmi.cli.known_positive import known_positive_cmd

    app.command("known-positive")(known_positive_cmd)
