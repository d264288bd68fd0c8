"""The run driver's import-linter contracts (pyproject.toml) fail when broken: a scratch copy of the package
gets one forbidden import, and ``lint-imports`` reports that contract BROKEN while the other stays KEPT.
Real tool, real source; nothing mocked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
ONE_DRIVER = "One run driver: no suite imports an executor or the commit loop"
NO_SUITE = "The run layer (driver, executors, sweeps) imports no suite"

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter not installed (the test extra has it)")


def _lint(tree: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), COLUMNS="400")
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=300)


def _status(out: str, name: str) -> str:
    line = next(ln for ln in out.splitlines() if ln.startswith(name))
    return line.rsplit(" ", 1)[-1]


@pytest.mark.parametrize(("module", "line", "broken", "kept"), [
    # a suite running its units on an executor by hand instead of through the driver
    ("quote/tables.py", "import tamperbench.runs.executor  # forbidden", ONE_DRIVER, NO_SUITE),
    ("sleight/site.py", "from tamperbench.runs.commit import commit  # forbidden", ONE_DRIVER, NO_SUITE),
    # the driver knowing a suite (judge: same layer as runs/, so only this contract stands in the way)
    ("runs/sweep.py", "import tamperbench.judge.samples  # forbidden", NO_SUITE, ONE_DRIVER),
])
def test_each_driver_contract_fails_when_broken(tmp_path, module, line, broken, kept):
    shutil.copytree(ROOT / "src" / "tamperbench", tmp_path / "src" / "tamperbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    clean = _lint(tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert _status(clean.stdout, broken) == "KEPT"
    path = tmp_path / "src" / "tamperbench" / module
    head, sep, rest = path.read_text().partition("from __future__ import annotations\n")
    assert sep, path
    path.write_text(head + sep + line + "\n" + rest)
    out = _lint(tmp_path)
    assert out.returncode != 0
    assert _status(out.stdout, broken) == "BROKEN", out.stdout
    assert _status(out.stdout, kept) == "KEPT", out.stdout
