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
from tamperbench.owmi.console import stdout_console


def _range(text: str, field: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise UserError(f"{field}: expected START:END (inclusive), got {text!r}") from None
    return lo, hi


def _spec(cls, field: str, **kw):
    from pydantic import ValidationError

    try:
        return cls(**{k: v for k, v in kw.items() if v is not None})
    except ValidationError as err:
        e = err.errors()[0]
        loc = ".".join(str(x) for x in e["loc"]) or field
        raise UserError(f"{field}{'.' + loc if loc != field else ''}: {e['msg']}") from None


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

    from tamperbench.owmi.analysis.profile import score_runs
    from tamperbench.owmi.analysis.render import save, to_markdown

    from tamperbench.owmi.analysis.reconstruction import load_validation

    from tamperbench.store.distinct import distinct_runs

    if dose_model not in ("simple", "paper"):
        raise UserError(f"--dose-model: expected simple or paper, got {dose_model!r}")
    if dose_model == "paper":  # before the score: a missing extra is one line, not minutes later
        from tamperbench.owmi.analysis.dose_paper import require_extra

        require_extra()
    validation = load_validation(recon_validation) if recon_validation is not None else None
    runs, notes = distinct_runs(runs)  # a run given twice, or a copy of one, is counted once
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    result = score_runs(runs, n_boot=boot, seed=seed, dose_boot=dose_boot, decay_level=decay_level,
                        recon_validation=validation)
    result["dose_model"] = dose_model
    if dose_model == "paper":
        from tamperbench.owmi.analysis.dose_paper import paper_ladders

        result["paper_ladders"] = paper_ladders(runs, seed=seed)
    if out is None:  # the default folder lies inside a run directory: never follow a link there
        from tamperbench.fsio import refuse_links

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
    from tamperbench.owmi.analysis.anchor_store import save_anchor
    from tamperbench.owmi.analysis.probe import ProbeSpec, describe_layer, run_probe_anchor

    reads = None
    if read_layers:
        try:
            reads = [int(x) for x in read_layers.split(",") if x.strip()]
        except ValueError:
            raise UserError(f"--read-layers: expected comma-separated integers, got {read_layers!r}") from None
    spec = _spec(ProbeSpec, "probe", model=model, layer=layer, read_layers=reads, n_items=items, n_perm=perm,
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


PRESETS: dict[str, dict[str, object]] = {
    "full": {},  # the source's counts: 400 training, 100 held-out directions
    "demo": {"train_seeds": (500000, 500023), "heldout_seeds": (900000, 900007)},  # make demo: 48 examples, 6 steps
    "test": {"train_seeds": (500000, 500011), "heldout_seeds": (900000, 900007), "epochs": 2},
}


def known_positive_cmd(
    out: Path = typer.Option(..., "--out", help="Anchor run directory (pass it to owmi score)."),
    model: str = typer.Option("embedded", "--model", "-m", help="Model spec."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or auto."),
    preset: str = typer.Option("full", "--preset", help="full (400 train / 100 held-out directions), demo (24 / 8) or test (12 / 8, 2 epochs)."),
    layer: Optional[int] = typer.Option(None, "--layer", help="Intervened resid_post layer (default: mid-depth)."),
    train_seeds: Optional[str] = typer.Option(None, "--train-seeds", help="START:END direction seeds for training."),
    heldout_seeds: Optional[str] = typer.Option(None, "--heldout-seeds", help="START:END held-out direction seeds."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Training epochs over the training directions (default: the preset's)."),
    dose: Optional[float] = typer.Option(None, "--dose", help="Replace: mixing weight in [0, 1] (default 1, full replacement)."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate."),
    boot: int = typer.Option(2000, "--boot", min=0, help="Bootstrap replicates for the intervals."),
    new: bool = typer.Option(False, "--new", help="Replace an anchor run with a different spec."),
    check: bool = typer.Option(False, "--check", help="Then run the adapted model (BASE+peft:OUT/adapter) and its base "
                               "through owmi run under each --readout and print both detection margins over sham."),
    readout: Optional[list[str]] = typer.Option(None, "--readout", help="With --check: generated, constrained, choice "
                                                "(repeat the option; default all three)."),
    items: int = typer.Option(9, "--items", min=1, max=9, help="With --check: built-in items (9: all)."),
    probe_tokens: int = typer.Option(24, "--probe-tokens", min=8, help="With --check: the generated answer's token budget "
                                     "(the JSON answer is about 15 tokens)."),
) -> None:
    """Known-positive anchor: LoRA fine-tune to report the intervention in the pipeline's words, held-out check;
    with --check, the adapted model through owmi run beside its base (Section 7.2)."""
    from tamperbench.models import load_backend
    from tamperbench.owmi.analysis.anchor_store import save_anchor, stored_anchor
    from tamperbench.owmi.analysis.known_positive import KnownPositiveSpec, run_known_positive
    from tamperbench.owmi.analysis.positive_check import READOUTS, run_check

    if preset not in PRESETS:
        raise UserError(f"--preset: must be one of {', '.join(PRESETS)}; got {preset!r}")
    kw: dict[str, object] = dict(PRESETS[preset])
    if train_seeds:
        kw["train_seeds"] = _range(train_seeds, "--train-seeds")
    if heldout_seeds:
        kw["heldout_seeds"] = _range(heldout_seeds, "--heldout-seeds")
    kw.update({k: v for k, v in dict(layer=layer, epochs=epochs, dose=dose, learning_rate=lr).items() if v is not None})
    spec = _spec(KnownPositiveSpec, "known-positive", model=model, **kw)
    readouts = tuple(readout or READOUTS)
    for r in readouts:
        if r not in READOUTS:
            raise UserError(f"--readout: {r!r} is not one of {', '.join(READOUTS)}")
    if check and readout is not None:  # a read-out this build cannot run is refused before training
        from tamperbench.owmi.analysis.positive_check import check_spec

        for r in readouts:
            check_spec(Path(out) / "adapter", model, spec.layer or 0, r, items=items, seeds=(0,), probe_tokens=probe_tokens)
    result = None if new else stored_anchor(out, spec, "known_positive")
    if result is not None and (Path(out) / "adapter" / "adapter_config.json").is_file():
        stdout_console().print(f"known positive: reusing the adapter trained in {out} with this spec (--new retrains)")
    else:
        backend = load_backend(model, device=device)
        result = run_known_positive(backend, spec, n_boot=boot, adapter_dir=Path(out) / "adapter")
        save_anchor(out, spec, result, new=new)
        del backend
        _print_anchor(result, out)
    if check:
        run_check(Path(out), base=model, layer=int(result["layer"]), readouts=readouts, items=items, seeds=(0,),
                  probe_tokens=probe_tokens, n_boot=boot, console=stdout_console(), strict=readout is not None)


def _print_anchor(result: dict, out: Path) -> None:
    t = result["training"]
    stdout_console().print(
        f"known positive at {result['site']}: trained on {t['n_examples']} examples ({len(t['trained_seeds'])} directions, "
        f"{t['steps']} steps, loss {t['loss_first']:.3f} -> {t['loss_last']:.3f}, {t['seconds']} s); held-out "
        f"{result['n_heldout']} directions (disjoint: {result['disjoint']}): hits {result['hits']}/{result['n_heldout']}, "
        f"false alarms {result['false_alarms']}/{result['n_heldout']}, d' = {result['dprime']['estimate']:.4f}, "
        f"AUROC = {result['auroc']['estimate']:.4f} {tuple(round(x, 4) for x in result['auroc']['ci'])}, errors "
        f"{result['errors']}/{result['n_trials']} (one-sided 95% bound {result['error_rate_upper95']:.4f}); "
        f"passes = {result['passes']}; saved -> {out}")


def register(app: typer.Typer) -> None:
    app.command("score")(score_cmd)
    app.command("probe")(probe_cmd)
    app.command("known-positive")(known_positive_cmd)
