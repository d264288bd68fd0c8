"""MkDocs hook: the CLI reference page is generated from the typer app at build time, never written by hand.

It uses typer's own Markdown generator (``typer.cli.get_docs_for_click``, what ``typer MODULE utils docs``
prints), in-process, so the page always matches the installed commands. A command or option without
help text fails the build (``mkdocs build --strict`` runs in ``make test``): an undocumented command
cannot land.
"""

from __future__ import annotations

import typer
import typer.main
from typer.cli import get_docs_for_click

MARKER = "<!-- cli-reference -->"


def _undocumented(command: typer.main.TyperCommand | typer.main.TyperGroup, path: str, *, root: bool = True) -> list[str]:
    """Names of commands and options under ``command`` that carry no help text."""
    missing: list[str] = []
    if not (command.help or command.short_help) and not root:
        missing.append(path)
    # typer vendors its own click (typer._click), so options and groups are told apart by duck typing
    for param in command.params:
        if getattr(param, "param_type_name", "") == "option" and not param.help and not param.hidden:
            missing.append(f"{path} {param.opts[0]}")
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in sorted(subcommands.items()):
            if not sub.hidden:
                missing.extend(_undocumented(sub, f"{path} {name}", root=False))
    return missing


def reference_markdown() -> str:
    """The whole CLI reference as Markdown; raises if any command or option lacks help text."""
    from tamperbench.cli import app

    command = typer.main.get_command(app)
    missing = _undocumented(command, "tamperbench")
    if missing:
        raise SystemExit("undocumented CLI commands/options: " + ", ".join(missing))
    ctx = typer.Context(command)
    return get_docs_for_click(obj=command, ctx=ctx, name="tamperbench", title="CLI reference")


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (mkdocs hook signature)
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference_markdown())
