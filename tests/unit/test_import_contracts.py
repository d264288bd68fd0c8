"""The architecture is a check: ``lint-imports`` (import-linter, contracts in pyproject.toml's
``[tool.importlinter]``, run by ``make lint``) passes on the tree and fails, naming the import, when
one forbidden import is added to a scratch copy of it. Real tool, real source; nothing mocked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter not installed (the test extra has it)")


def _scratch(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "src" / "tamperbench", tmp_path / "src" / "tamperbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint(tree: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), COLUMNS="200")
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=300)


def _insert(path: Path, line: str) -> None:
    text = path.read_text()
    head, sep, rest = text.partition("from __future__ import annotations\n")
    assert sep, path
    path.write_text(head + sep + line + "\n" + rest)


@pytest.mark.parametrize(("module", "line", "named"), [
    # the model layer reaching up into a suite
    ("models/generate.py", "import tamperbench.sleight.plan  # forbidden", "tamperbench.models.generate -> tamperbench.sleight.plan"),
    # one suite importing another
    ("quote/tables.py", "import tamperbench.owmi.run.spec  # forbidden", "tamperbench.quote.tables -> tamperbench.owmi.run.spec"),
    # the plumbing importing a suite (estimate plans through the registry, never by import)
    ("estimate.py", "import tamperbench.owmi.run.plan  # forbidden", "tamperbench.estimate -> tamperbench.owmi.run.plan"),
])
def test_lint_imports_fails_naming_a_forbidden_import(tmp_path, module, line, named):
    tree = _scratch(tmp_path)
    clean = _lint(tree)
    assert clean.returncode == 0, clean.stdout + clean.stderr  # the copy as it is keeps every contract
    _insert(tree / "src" / "tamperbench" / module, line)
    broken = _lint(tree)
    assert broken.returncode != 0
    assert named in broken.stdout, broken.stdout
    assert "BROKEN" in broken.stdout


def test_lint_imports_fails_on_a_cycle(tmp_path):
    """The circle issue 28 broke (prefix_share <-> prefix_tree's shared part), closed again inside one
    layer: only the no-cycles contract can see it."""
    tree = _scratch(tmp_path)
    _insert(tree / "src" / "tamperbench" / "models" / "prefix_groups.py", "import tamperbench.models.prefix_share  # forbidden")
    broken = _lint(tree)
    assert broken.returncode != 0
    out = broken.stdout
    assert "No import cycles between sibling modules or packages, at any depth BROKEN" in " ".join(out.split()), out
    assert "No cycles are allowed in tamperbench.models." in out and "- .prefix_groups -> .prefix_share" in out, out
    assert "Layers: cli > suites" in out and "KEPT" in out  # the other contracts still hold
