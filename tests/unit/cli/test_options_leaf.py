"""``cli/options.py`` holds the typer option types that every model-running command declares, the
suites' own command lines included. The import-linter layers let a suite's ``cli`` module import it
(``ignore_imports`` in pyproject.toml) on one condition, checked here: it imports no tamperbench
module, so it can never pull the root command (or anything above a suite) into a suite."""

from __future__ import annotations

import ast
from pathlib import Path

import tamperbench.cli.options as options


def test_the_shared_options_import_no_tamperbench_module():
    tree = ast.parse(Path(options.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported and not {m for m in imported if m == "tamperbench" or m.startswith("tamperbench.")}, imported


def test_importing_the_options_does_not_build_the_root_command():
    import subprocess
    import sys

    code = "import sys, tamperbench.cli.options; print('tamperbench.cli.root' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr
