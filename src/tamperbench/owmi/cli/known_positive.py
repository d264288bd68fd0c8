"""``owmi known-positive``: train (or reuse) the known positive's adapter, then with ``--check`` run
it beside its base through ``owmi run`` and ``owmi score`` on held-out directions (``positive_check``).

The adapter is content-addressed (``anchor_store.adapter_cache``: the spec and the base weights'
sha256): a run into a fresh ``--out`` reuses an adapter trained before with the same spec on the
same weights, and says so. The command prints its own run time (wall and CPU) at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tamperbench.errors import UserError
from tamperbench.owmi.cli.util import parse_range, build_spec
from tamperbench.owmi.cli import stdout_console

PRESETS: dict[str, dict[str, object]] = {
    "full": {},  # the source's counts: 400 training, 100 held-out directions (the check: 50 items x 2 seeds)
    # make demo: 48 examples, 6 steps; the check on 20 held-out directions (10 items x 2 seeds), below the pass
    # rule's 100 pairs, so its verdict reads TOO FEW PAIRS when every other threshold is met (full: the verdict)
    "demo": {"train_seeds": (500000, 500023), "heldout_seeds": (900000, 900019)},
    "test": {"train_seeds": (500000, 500011), "heldout_seeds": (900000, 900007), "epochs": 1, "batch_size": 4},
}


def known_positive_cmd(
    out: Path = typer.Option(..., "--out", help="Anchor run directory (pass it to owmi score)."),
    model: str = typer.Option("embedded", "--model", "-m", help="Model spec."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or auto."),
    preset: str = typer.Option("full", "--preset", help="full (400 train / 100 held-out directions: the check runs "
                               "100 intervention and 100 sham pairs per model), demo (24 / 20: below the pass rule's 100 pairs) or test (12 / 8, one epoch in batches of 4)."),
    layer: Optional[int] = typer.Option(None, "--layer", help="Intervened resid_post layer (default: mid-depth)."),
    train_seeds: Optional[str] = typer.Option(None, "--train-seeds", help="START:END direction seeds for training."),
    heldout_seeds: Optional[str] = typer.Option(None, "--heldout-seeds", help="START:END held-out direction seeds (the "
                                                "check runs one unit per direction: items x 2 seeds)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Training epochs over the training directions (default: the preset's)."),
    dose: Optional[float] = typer.Option(None, "--dose", help="Replace: mixing weight in [0, 1] (default 1, full replacement)."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate."),
    boot: int = typer.Option(2000, "--boot", min=0, help="Bootstrap replicates for the intervals."),
    new: bool = typer.Option(False, "--new", help="Replace an anchor run with a different spec (and retrain)."),
    check: bool = typer.Option(False, "--check", help="Then run the adapted model (BASE+peft:OUT/adapter) and its base "
                               "through owmi run and owmi score on the held-out directions, under each --readout."),
    readout: Optional[list[str]] = typer.Option(None, "--readout", help="With --check: generated, constrained, choice "
                                                "(repeat the option; default: choice, the deciding read-out)."),
    probe_tokens: int = typer.Option(24, "--probe-tokens", min=8, help="With --check: the generated answer's token budget "
                                     "(the JSON answer is about 15 tokens)."),
) -> None:
    """Known-positive anchor: LoRA fine-tune to report the intervention in the pipeline's words, held-out check;
    with --check, the adapted model through owmi run and owmi score beside its base (Section 7.2)."""
    import time

    from tamperbench.owmi.score.anchor_store import stored_anchor
    from tamperbench.owmi.controls.known_positive import KnownPositiveSpec
    from tamperbench.owmi.controls.positive_check import check_disjoint, check_spec
    from tamperbench.owmi.score.positive import DECIDING_READOUT, READOUTS

    t0, c0 = time.perf_counter(), time.process_time()
    if preset not in PRESETS:
        raise UserError(f"--preset: must be one of {', '.join(PRESETS)}; got {preset!r}")
    kw: dict[str, object] = dict(PRESETS[preset])
    if train_seeds:
        kw["train_seeds"] = parse_range(train_seeds, "--train-seeds")
    if heldout_seeds:
        kw["heldout_seeds"] = parse_range(heldout_seeds, "--heldout-seeds")
    kw.update({k: v for k, v in dict(layer=layer, epochs=epochs, dose=dose, learning_rate=lr).items() if v is not None})
    spec = build_spec(KnownPositiveSpec, "known-positive", model=model, **kw)
    readouts = tuple(readout or (DECIDING_READOUT,))
    for r in readouts:
        if r not in READOUTS:
            raise UserError(f"--readout: {r!r} is not one of {', '.join(READOUTS)}")
    if check:  # a read-out this build cannot run, or too few held-out directions, is refused before training
        check_disjoint(spec.seeds("train"), spec.heldout_seeds)
        for r in readouts:
            check_spec(Path(out) / "adapter", model, spec.layer or 0, r, directions=spec.heldout_seeds,
                       probe_tokens=probe_tokens)
    con = stdout_console()
    result = None if new else stored_anchor(out, spec, "known_positive")
    if result is not None and (Path(out) / "adapter" / "adapter_config.json").is_file():
        con.print(f"known positive: reusing the adapter trained in {out} with this spec (--new retrains)")
    else:
        result = _train_or_reuse(out, spec, device=device, boot=boot, new=new)
    if check:
        from tamperbench.owmi.controls.positive_check import run_check

        run_check(Path(out), base=model, anchor=result, readouts=readouts, directions=spec.heldout_seeds,
                  probe_tokens=probe_tokens, n_boot=boot, console=con, strict=readout is not None, spec=spec)
    con.print(f"run time: {time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU "
              f"(this process: training or reuse{', the check runs and scoring' if check else ''})")


def _train_or_reuse(out: Path, spec, *, device: str, boot: int, new: bool) -> dict:
    """The adapter from the content-addressed cache when this spec was trained on these weights
    before (copied into OUT/adapter), else trained now and put in the cache."""
    import shutil

    from tamperbench.models import load_backend
    from tamperbench.owmi.score.anchor_store import cached_adapter, save_anchor, store_adapter
    from tamperbench.owmi.controls.known_positive import run_known_positive

    backend = load_backend(spec.model, device=device)
    sha = backend.provenance.sha256
    hit = None if new else cached_adapter(spec, sha)  # --new trains again
    adapter_dir = Path(out) / "adapter"
    if hit is not None:
        src, result = hit
        save_anchor(out, spec, {**result, "adapter_dir": str(adapter_dir), "reused_from": str(src.parent)}, new=new)
        if adapter_dir.exists():
            shutil.rmtree(adapter_dir)
        shutil.copytree(src, adapter_dir)
        stdout_console().print(f"known positive: reusing the adapter trained with this spec on these weights "
                               f"({src.parent}; --new trains again)")
    else:
        result = run_known_positive(backend, spec, n_boot=boot, adapter_dir=adapter_dir)
        save_anchor(out, spec, result, new=new)
        store_adapter(spec, sha, adapter_dir, result)
    del backend
    _print_anchor(result, out)
    return result


def _print_anchor(result: dict, out: Path) -> None:
    t = result["training"]
    stdout_console().print(
        f"known positive at {result['site']}: trained on {t['n_examples']} examples ({len(t['trained_seeds'])} directions, "
        f"{t['steps']} steps, loss {t['loss_first']:.3f} -> {t['loss_last']:.3f}, {t['seconds']} s); the anchor's own "
        f"token-level diagnostic (evaluate(), not the check) on {result['n_heldout']} held-out directions (disjoint: "
        f"{result['disjoint']}): hits {result['hits']}/{result['n_heldout']}, "
        f"false alarms {result['false_alarms']}/{result['n_heldout']}, d' = {result['dprime']['estimate']:.4f}, "
        f"AUROC = {result['auroc']['estimate']:.4f} {tuple(round(x, 4) for x in result['auroc']['ci'])}, errors "
        f"{result['errors']}/{result['n_trials']} (one-sided 95% bound {result['error_rate_upper95']:.4f}); "
        f"passes = {result['passes']}; saved -> {out}")
