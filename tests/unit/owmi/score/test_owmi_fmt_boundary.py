"""The score output modules share formatting through the public ``owmi.analysis.fmt`` (issue 28 item 3):
``decay`` and ``reconstruction`` do not import ``render`` (which imports them: a circle), and no module
of the analysis package imports an underscore name from another module."""

from __future__ import annotations

import ast
from pathlib import Path

import tamperbench.owmi.score as pkg

ROOT = Path(pkg.__file__).parent


def _imports(path: Path) -> list[tuple[str, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out += [(node.module, a.name) for a in node.names]
    return out


def test_no_private_name_crosses_a_module_boundary():
    crossing = [(p.name, m, n) for p in sorted(ROOT.glob("*.py")) for m, n in _imports(p)
                if m.startswith("tamperbench") and n.startswith("_") and not n.startswith("__")]
    assert crossing == []


def test_decay_and_reconstruction_do_not_import_render():
    for name in ("decay.py", "reconstruction.py", "fmt.py"):
        assert not [m for m, _ in _imports(ROOT / name) if m.endswith("score.render")], name


def test_fmt_behaviour():
    from tamperbench.owmi.score.fmt import ci, esc, margin, num

    assert num(float("nan")) == "n/a" and num(0.5, 2) == "0.50" and num(3) == "3"
    assert ci([0.1, float("inf")]) == "n/a" and ci([0.1, 0.2], 1) == "[0.1, 0.2]"
    assert margin(None) == "n/a" and margin({"estimate": 0.25, "ci": [0.0, 0.5], "pairs": 4}) == "+0.2500 [0.0000, 0.5000] (n=4)"
    assert "|" not in esc("a|b").replace("\\|", "")
