"""``tamperbench owmi train-sae``, added to the ``owmi`` typer app (see ``owmi/controls/sae_train.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tamperbench.errors import UserError


def train_sae_cmd(
    out: Path = typer.Option(..., "--out", help="SAE folder to write (SAELens format: cfg.json + sae_weights.safetensors)."),
    model: str = typer.Option("embedded", "--model", "-m", help="Model spec."),
    layer: int = typer.Option(12, "--layer", help="Layer of the residual site."),
    site: str = typer.Option("resid_post", "--site", help="resid_post or resid_pre."),
    preset: str = typer.Option("full", "--preset", help="full (1024 features, 600 texts, 2000 steps: minutes on a CPU) "
                               "or demo (256 features, 200 texts, 300 steps)."),
    features: Optional[int] = typer.Option(None, "--features", help="SAE width (d_sae)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Adam steps."),
    l1: Optional[float] = typer.Option(None, "--l1", help="Sparsity coefficient (decoder-norm-weighted L1)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the initialisation and the batches."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or auto."),
) -> None:
    """Train a small SAE on one residual site of a model and write it in SAELens's disk format."""
    from pydantic import ValidationError

    from tamperbench.owmi.cli import stdout_console
    from tamperbench.owmi.controls.sae_train import PRESETS, SaeTrainSpec, train_sae

    if preset not in PRESETS:
        raise UserError(f"--preset: must be one of {', '.join(PRESETS)}; got {preset!r}")
    kw = {**PRESETS[preset], **{k: v for k, v in dict(features=features, steps=steps, l1=l1).items() if v is not None}}
    try:
        spec = SaeTrainSpec.model_validate(dict(model=model, layer=layer, site=site, seed=seed, **kw))
    except ValidationError as err:
        e = err.errors()[0]
        raise UserError(f"--{e['loc'][0]}: {e['msg']}") from None
    info = train_sae(spec, out, device=device)
    verb = "already trained with this spec" if info.get("reused") else "trained"
    stdout_console().print(
        f"SAE {verb}: {out} ({spec.site}.{spec.layer} of {spec.model}, d_sae {spec.features}); {info['tokens']} tokens, "
        f"{info['steps']} steps, {info['seconds']} s; relative MSE {info['relative_mse']:.3f}, L0 {info['l0']:.1f}, "
        f"{info['alive_features']} features alive", markup=False)


def register(app: typer.Typer) -> None:
    app.command("train-sae")(train_sae_cmd)
