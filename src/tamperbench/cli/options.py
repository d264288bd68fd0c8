"""Options shared by every command that runs a model, declared once (typer ``Annotated`` types)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model spec: embedded, a directory, a .gguf file or a hub id.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for sampling and bootstrap resampling.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="cpu, cuda or auto.")]
DtypeOpt = Annotated[Optional[str], typer.Option("--dtype", help="float32 (CPU default), bfloat16 (GPU default) or float16.")]
BatchSizeOpt = Annotated[
    Optional[int], typer.Option("--batch-size", help="Cap on rows decoded together (default: chosen from free memory).")
]
ChatTemplateOpt = Annotated[
    Optional[str],
    typer.Option("--chat-template", help="none (the raw prompt as a completion prompt, for base models) or a Jinja "
                                        "chat template FILE; default: the model's own."),
]
NewOpt = Annotated[bool, typer.Option("--new", help="Replace an existing run in --out that has a different spec.")]
