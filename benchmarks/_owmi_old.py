"""The OWMI engine of an earlier commit, importable beside this one in the same process.

Why: a speed-up is measured as a same-process ratio (old engine and new engine alternated, so load
from other processes falls on both), and both engines are the package ``tamperbench``. This exports
``src/tamperbench`` at ``commit`` (``git archive``) into a temporary directory as a package named
``tamperbench_old`` with every import of ``tamperbench`` renamed, and imports it. Nothing in the
working tree changes.
"""

from __future__ import annotations

import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

_IMPORT = re.compile(r"(?<![\w/-])tamperbench(?=\.[a-z_]|\s+import\b|[ \t]*$)", re.M)


def load_old(commit: str, name: str = "tamperbench_old") -> ModuleType:
    """The package ``src/tamperbench`` of ``commit``, imported as ``name``."""
    repo = Path(__file__).resolve().parents[1]
    blob = subprocess.run(["git", "-C", str(repo), "archive", commit, "src/tamperbench"], check=True,
                          capture_output=True).stdout
    root = Path(tempfile.mkdtemp(prefix="owmi-old-"))
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(root, filter="data")
    pkg = root / name
    (root / "src" / "tamperbench").rename(pkg)
    for f in pkg.rglob("*.py"):
        text = f.read_text()
        f.write_text(_IMPORT.sub(name, text))
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(root))
        sys.path.append(str(root))  # later lazy imports of the old package still resolve
