"""Which commit a session names (``runs.session._checkout``): the checkout tamperbench runs from, and nothing
for a copy of tamperbench that merely sits inside some other git repository (a virtual environment kept in a
project's folder): there the project's commit would be named as tamperbench's."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SESSION = ROOT / "src" / "tamperbench" / "runs" / "session.py"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_copy_inside_another_repository_names_no_commit(tmp_path):
    repo = tmp_path / "project"
    (repo / "venv" / "tamperbench" / "runs").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / ".gitignore").write_text("venv/\n")
    _git(repo, "add", ".gitignore")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "project")
    copy = repo / "venv" / "tamperbench" / "runs" / "session.py"
    shutil.copy(SESSION, copy)
    spec = importlib.util.spec_from_file_location("session_copy_in_project", copy)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module._checkout() == (None, None)
    _git(repo, "add", "-f", str(copy))  # tracked by that repository: then it is its checkout
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "vendored")
    module._checkout.cache_clear()
    assert module._checkout() == (_git(repo, "rev-parse", "HEAD"), False)
    init = repo / "venv" / "tamperbench" / "__init__.py"  # another module of the package: an edit there is dirty
    init.write_text("")
    _git(repo, "add", "-f", str(init))
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "package")
    init.write_text("CHANGED = True\n")
    module._checkout.cache_clear()
    assert module._checkout() == (_git(repo, "rev-parse", "HEAD"), True)
    (repo / "notes.txt").write_text("outside the package")  # outside it: not this package's state
    _git(repo, "add", "notes.txt")
    init.write_text("")
    module._checkout.cache_clear()
    assert module._checkout() == (_git(repo, "rev-parse", "HEAD"), False)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_this_checkout_names_its_head():
    from tamperbench.runs.session import _checkout

    commit, dirty = _checkout()
    assert commit == _git(ROOT, "rev-parse", "HEAD") and isinstance(dirty, bool)
