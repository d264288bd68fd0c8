"""Layout rules that keep the code reviewable (no model, no I/O beyond reading src/).

- No module under src/ is longer than 400 lines (small modules, one job each).
- A suite package never imports another suite package: suites share code only through shared
  packages (models, store, runs, stats, judge, report, ...), so any suite can be added, removed or
  run alone. Imports inside functions count too (they are read from the syntax tree).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tamperbench.suites import BUILTIN

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = SRC / "tamperbench"
MAX_LINES = 400
SHARED = {"judge"}  # judges any suite's replies; suites may use it, it must not import a suite either way
SUITES = ({s.cli.split(".")[1] for s in BUILTIN if s.cli.startswith("tamperbench.")} | {"owmi"}) - SHARED


def _modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def test_the_rules_see_the_code():
    assert len(_modules()) > 30 and {"sleight", "quote", "owmi"} <= SUITES


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_module_is_at_most_400_lines(path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(SRC)} has {n} lines (limit {MAX_LINES}): split it by job"


def imported_packages(path: Path, root: Path = SRC) -> set[str]:
    """``tamperbench.<package>`` names imported anywhere in the module (absolute and relative imports)."""
    rel = path.relative_to(root).with_suffix("").parts  # ("tamperbench", "sleight", "runner")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(rel[: len(rel) - node.level])
                names = [".".join(base + ([node.module] if node.module else []))]
                if not node.module:
                    names = [".".join(base + [a.name]) for a in node.names]
            elif node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if len(parts) > 1 and parts[0] == "tamperbench":
                found.add(parts[1])
    return found


def test_import_reader_sees_nested_and_relative_imports(tmp_path):
    mod = tmp_path / "tamperbench" / "sleight" / "probe.py"
    mod.parent.mkdir(parents=True)
    mod.write_text("def f():\n    from tamperbench.quote import items\n    from ..owmi import x\n"
                   "    import tamperbench.judge.runner\n    from . import metrics\n")
    assert imported_packages(mod, tmp_path) == {"quote", "owmi", "judge", "sleight"}


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_suite_package_imports_no_other_suite(suite):
    offenders = []
    for path in sorted((PKG / suite).rglob("*.py")):
        bad = imported_packages(path) & (SUITES - {suite})
        offenders += [f"{path.relative_to(SRC)} imports tamperbench.{b}" for b in sorted(bad)]
    assert not offenders, "; ".join(offenders)


def test_shared_packages_import_no_suite():
    """The judge is shared by all suites: it reads sleight records from the store, never the sleight package."""
    offenders = [f"{p.relative_to(SRC)} imports tamperbench.{b}" for pkg in SHARED
                 for p in sorted((PKG / pkg).rglob("*.py")) for b in sorted(imported_packages(p) & SUITES)]
    assert not offenders, "; ".join(offenders)


# Test folders that are not a package of src/tamperbench: the repository's own tools/ and benchmarks/
# scripts.
NOT_PACKAGES = {"tools", "benchmarks"}


def test_the_tests_tree_mirrors_src():
    """Tests of ``src/tamperbench/X/...`` live in ``tests/{unit,integration,e2e}/X/``; tests of a
    top-level module ``src/tamperbench/x.py`` (and of the package as a whole) directly in the tier folder."""
    tests = Path(__file__).resolve().parents[1]
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    strays = [f"{tier.name}/{d.name}" for tier in sorted(tests.iterdir()) if tier.is_dir() and tier.name != "__pycache__"
              for d in sorted(tier.iterdir()) if d.is_dir() and d.name != "__pycache__"
              and d.name not in packages | NOT_PACKAGES]
    assert not strays, f"test folders with no src/tamperbench package of that name: {strays}"
