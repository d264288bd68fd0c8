"""tools/owmi_walk.py counts the newcomer's walk as it says: places, modules and turn-backs at each
level, only real functions as places, and the reading level cut where orchestration calls out.

The counting runs on synthetic walks; the tracing runs real code under ``sys.setprofile``: small
functions compiled into modules named like ``tamperbench.owmi`` ones (no model, no run)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("owmi_walk", ROOT / "tools" / "owmi_walk.py")
assert _spec is not None and _spec.loader is not None
walk = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(walk)


def _place(module: str, function: str, depth: int, reading: int | None = None) -> dict:
    return {"module": "tamperbench.owmi." + module, "function": function, "depth": depth, "reading": reading}


WALK = [  # first-visit order
    _place("cli", "run_cmd", 1, 0),
    _place("run.spec", "load_spec", 2, 1),
    _place("run.runner", "run", 2, 2),
    _place("run.validate", "validate", 3, 3),
    _place("engine.objects", "resolve", 4, 4),  # the orchestration's call into the engine
    _place("engine.objects", "Target.site", 5),  # what the engine calls in turn
    _place("run.runner", "_load", 3, 6),  # back to the runner: a turn-back
    _place("engine.base", "Engine.prepare", 4, 5),  # read before _load on the reading path (ranked 5)
    _place("run.spec", "OwmiSpec.frames", 5),  # a spec method the engine calls back
]


def test_counts_places_modules_and_turn_backs_at_each_level():
    got = walk.report(WALK, depth=3)
    # whole: cli, spec, runner, validate, objects, runner (back), base, spec (back)
    assert got["whole walk"] == {"places": 9, "modules": 6, "turn_backs": 2}
    # depth <= 3: cli, spec, runner, validate, runner (back)
    assert got["depth <= 3"] == {"places": 5, "modules": 4, "turn_backs": 1}
    # reading, in reading rank: cli, spec, runner, validate, objects, base, runner (back)
    assert got["reading"] == {"places": 7, "modules": 6, "turn_backs": 1}
    assert [p["function"] for p in walk.level(WALK, "reading")][-2:] == ["Engine.prepare", "_load"]


def test_a_module_entered_again_without_leaving_is_no_turn_back():
    same = [_place("run.plan", "a", 1), _place("run.plan", "b", 2), _place("run.plan", "c", 2)]
    assert walk.counts(same) == {"places": 3, "modules": 1, "turn_backs": 0}


def test_the_flat_layout_before_the_cut_by_phase_has_the_same_orchestration():
    assert all(walk.orchestration("tamperbench.owmi." + m) for m in ("runner", "keys", "plan", "cli", "run.execute"))
    assert not any(walk.orchestration("tamperbench.owmi." + m) for m in ("engine", "batched", "engine.base", "score.tables"))


def _module(name: str, source: str, **names) -> dict:
    """A module named ``name`` whose code has a ``.py`` file name, as the walk sees real modules."""
    ns = {"__name__": name, **names}
    exec(compile(source, f"/nowhere/{name.replace('.', '/')}.py", "exec"), ns)
    return ns


def test_class_bodies_module_bodies_lambdas_and_comprehensions_are_not_places():
    engine = _module("tamperbench.owmi.engine.toy", (
        "def helper():\n    return 1\n"
        "def entry():\n    return helper() + sum(x for x in (1, 2))\n"))
    source = (
        "class Shape:\n    size = 1\n    def area(self):\n        return self.size\n"  # a class body, run at import
        "def run():\n"
        "    class Local:\n        pass\n"  # a class body run inside a function
        "    f = lambda: entry()\n"
        "    return Shape().area() + f() + len([i for i in range(2)])\n")
    places = walk.trace(lambda: _module("tamperbench.owmi.run.toy", source, entry=engine["entry"])["run"]())
    names = [(p["module"].rsplit(".", 2)[-2], p["function"], p["depth"], p["reading"]) for p in places]
    assert names == [
        ("run", "run", 1, 0),
        ("run", "Shape.area", 2, 1),
        ("engine", "entry", 2, 2),  # called from orchestration (through a lambda, which is no place): reading
        ("engine", "helper", 3, None),  # called from the engine: below the reading level
    ], names
