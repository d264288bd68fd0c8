"""The docs' CLI reference is generated from the typer app (tools/cli_reference.py, an MkDocs hook).

The hook refuses to build when a command or option has no help text, so `mkdocs build --strict` in
`make test` fails on an undocumented command. These tests run the hook's functions directly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import typer
import typer.main

ROOT = Path(__file__).resolve().parents[3]


def _hook():
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "tools" / "cli_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_undocumented_option_and_command_are_named() -> None:
    app = typer.Typer()

    @app.command()
    def good(x: int = typer.Option(1, help="documented")) -> None:
        """A documented command."""

    @app.command()
    def bad(y: int = typer.Option(1)) -> None:
        pass

    missing = _hook()._undocumented(typer.main.get_command(app), "tool")
    assert missing == ["tool bad", "tool bad --y"]


def test_the_real_cli_is_fully_documented_and_rendered() -> None:
    markdown = _hook().reference_markdown()
    for command in ("tamperbench sleight run", "tamperbench quote score", "tamperbench owmi score", "tamperbench judge run"):
        assert f"`{command}`" in markdown


def test_the_hook_replaces_only_its_marker() -> None:
    hook = _hook()
    assert hook.on_page_markdown("# plain page", None, None, None) == "# plain page"
    with pytest.raises(SystemExit):
        # a page asking for the reference while the app has an undocumented option fails the build
        original = hook._undocumented
        hook._undocumented = lambda command, path: ["tamperbench x --y"]
        try:
            hook.on_page_markdown(hook.MARKER, None, None, None)
        finally:
            hook._undocumented = original
