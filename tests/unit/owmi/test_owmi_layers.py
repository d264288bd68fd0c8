"""OWMI's cut by phase is a check: the ``owmi-layers`` import-linter contract fails, naming the import,
when the score layer imports run code or the engine imports the score layer (a scratch copy of the
real source, the real tool); and an old flat module path still imports, with a DeprecationWarning,
as the very module at its new home."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _insert(path: Path, line: str) -> None:
    head, sep, rest = path.read_text().partition("from __future__ import annotations\n")
    assert sep, path
    path.write_text(head + sep + line + "\n" + rest)


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter not installed (the test extra has it)")
def test_owmi_layers_contract_fails_naming_the_upward_import(tmp_path):
    shutil.copytree(ROOT / "src" / "tamperbench", tmp_path / "src" / "tamperbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    owmi = tmp_path / "src" / "tamperbench" / "owmi"
    _insert(owmi / "score" / "verdict.py", "import tamperbench.owmi.run.runner  # forbidden: score reads records only")
    _insert(owmi / "engine" / "choice.py", "import tamperbench.owmi.score.fmt  # forbidden: siblings")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "src"), COLUMNS="200")
    out = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode != 0
    text = " ".join(out.stdout.split())
    assert "OWMI by phase: cli > controls > run > engine | score > protocol" in text and "BROKEN" in text, out.stdout
    assert "tamperbench.owmi.score.verdict -> tamperbench.owmi.run.runner" in text, out.stdout
    assert "tamperbench.owmi.engine.choice -> tamperbench.owmi.score.fmt" in text, out.stdout


@pytest.mark.parametrize("old, new", [("runner", "run.runner"), ("spec", "run.spec"), ("operators", "engine.operators"),
                                      ("analysis.closedset", "score.closedset"),
                                      ("analysis.positive_check", "controls.positive_check")])
def test_old_module_paths_import_the_moved_module_with_a_warning(old, new):
    sys.modules.pop(f"tamperbench.owmi.{old}", None)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        module = importlib.import_module(f"tamperbench.owmi.{old}")
    assert module is importlib.import_module(f"tamperbench.owmi.{new}")
    assert module.__spec__.name == f"tamperbench.owmi.{new}"  # the moved module keeps its own identity
    assert any(issubclass(w.category, DeprecationWarning) and f"moved to tamperbench.owmi.{new}" in str(w.message)
               for w in got), [str(w.message) for w in got]
