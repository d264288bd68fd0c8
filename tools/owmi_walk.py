"""The newcomer's walk through ``owmi run``: places, modules and turn-backs of a tiny run.

Why: a reader follows a spec through ``owmi run`` by opening each function the first time the run
calls it. This runs a tiny ``owmi run`` in this process (the CLI's own ``run`` command, embedded
model) under ``sys.setprofile`` and keeps every call into a ``tamperbench.owmi`` function, in the
order each function is first entered -- the reading order. From that walk it counts:

* places: distinct functions entered. Only real functions count (code objects with ``CO_OPTIMIZED``):
  a class body or module body run at import time is not a place. Comprehensions, lambdas and
  generator expressions are part of the function that holds them, and methods a decorator generates
  (a dataclass's ``__init__``) have no source to read: neither is counted;
* modules: distinct modules those functions live in;
* turn-backs: how often the walk enters a module it had already visited and then left.

Each is printed at three levels:

* ``whole walk``: every place;
* ``depth <= N`` (``--depth``, default 3): the functions at most N tamperbench.owmi calls below the
  command;
* ``reading``: what a newcomer follows -- the orchestration from the command down to each engine or
  score entry point: the places whose callers, all the way up to the command, are orchestration
  (``owmi.cli`` or ``owmi.run``; on the flat layout before the cut by phase, the modules that moved
  there), in the order the first such call enters them. An engine or score function is counted once,
  where the orchestration calls it; what it calls in turn is not.

Usage (from the repository root, with PYTHONPATH pointing at the ``src`` to measure)::

    python tools/owmi_walk.py                    # the numbers
    python tools/owmi_walk.py --list             # and the walk itself, one place a line
    python tools/owmi_walk.py --save walk.json   # keep the walk; --load walk.json counts it again
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

SPEC = dict(  # the quick preset's axes at their smallest: every condition, one cell, two tracks
    models=["embedded"], benchmarks=["builtin"], items_per_benchmark=1, seeds=[0],
    objects=[{"kind": "resid_post", "layer": 12}], operators=[{"name": "add", "dose": 16.0}],
    tracks=["A", "B_delayed"], probes=["detection", "localization"], task_max_new_tokens=4, probe_max_new_tokens=4,
    reflection_max_new_tokens=4, calibration_steps=2, readout="choice",
)
SKIP = ("<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<module>")
PKG = "tamperbench.owmi."
ORCHESTRATION = ("cli", "run")  # the phases a newcomer reads top-down
# modules of the flat layout (before the cut by phase) that now live in owmi.cli or owmi.run
FLAT_ORCHESTRATION = {"cli", "console", "sae_cli", "spec", "keys", "plan", "items", "anchor_items", "runner",
                      "validate", "analysis.cli", "analysis.cli_util", "analysis.kp_cli"}

Place = dict[str, Any]  # {"module", "function", "depth", "reading"}


def orchestration(module: str) -> bool:
    """True for a module a newcomer reads as the run's orchestration (owmi.cli, owmi.run)."""
    rel = module.removeprefix(PKG)
    return rel.split(".")[0] in ORCHESTRATION or rel in FLAT_ORCHESTRATION


def is_place(frame) -> bool:
    """A real tamperbench.owmi function with source: not a class or module body run at import,
    not a comprehension or lambda, not a method a decorator generated."""
    code = frame.f_code
    return (frame.f_globals.get("__name__", "").startswith(PKG) and code.co_filename.endswith(".py")
            and bool(code.co_flags & inspect.CO_OPTIMIZED) and not any(s in code.co_qualname for s in SKIP))


def trace(call: Callable[[], object]) -> list[Place]:
    """The places ``call()`` enters, in first-visit order. ``depth``: how many tamperbench.owmi
    functions are on the stack at the first visit, this one included; ``reading``: the rank of the
    first visit whose callers are all orchestration (None when there is none)."""
    seen: dict[tuple[str, str], Place] = {}
    stack: list = []  # (frame, module) of the places on the stack
    reading = 0

    def prof(frame, event, arg):
        nonlocal reading
        if event == "return":
            if stack and stack[-1][0] is frame:
                stack.pop()
            return
        if event != "call" or not is_place(frame):
            return
        mod = frame.f_globals["__name__"]
        key = (mod, frame.f_code.co_qualname)
        place = seen.setdefault(key, {"module": mod, "function": key[1], "depth": len(stack) + 1, "reading": None})
        if place["reading"] is None and all(orchestration(m) for _, m in stack):
            place["reading"] = reading
            reading += 1
        stack.append((frame, mod))

    sys.setprofile(prof)
    try:
        call()
    finally:
        sys.setprofile(None)
    return list(seen.values())


def walk(out: Path, config: Path) -> list[Place]:
    """The places of ``owmi run --config config --out out`` (:func:`trace`)."""
    from tamperbench.cli import main

    def command() -> None:
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the run's summary table is not the walk
                main()
        except SystemExit as stop:
            if stop.code not in (0, None):
                raise

    argv = sys.argv
    sys.argv = ["tamperbench", "owmi", "run", "--config", str(config), "--out", str(out), "--new"]
    try:
        return trace(command)
    finally:
        sys.argv = argv


def level(places: list[Place], which: str | int | None = None) -> list[Place]:
    """The places of one level, in reading order: None the whole walk, an int the top of the call
    tree to that depth, ``"reading"`` the orchestration and its calls into engine and score."""
    if which is None:
        return list(places)
    if which == "reading":
        return sorted((p for p in places if p["reading"] is not None), key=lambda p: p["reading"])
    return [p for p in places if p["depth"] <= int(which)]


def counts(places: list[Place]) -> dict[str, int]:
    """Places, modules and turn-backs (entering a module already visited and left) of a walk."""
    modules: list[str] = []
    turn_backs = 0
    for p in places:
        mod = p["module"]
        if modules and modules[-1] == mod:
            continue
        if mod in modules:
            turn_backs += 1
        modules.append(mod)
    return dict(places=len(places), modules=len(set(modules)), turn_backs=turn_backs)


def report(places: list[Place], depth: int = 3) -> dict[str, dict[str, int]]:
    return {"whole walk": counts(level(places)), f"depth <= {depth}": counts(level(places, depth)),
            "reading": counts(level(places, "reading"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the walk, one place a line (R: on the reading path)")
    ap.add_argument("--depth", type=int, default=3, help="the top of the call tree: places at most this deep")
    ap.add_argument("--save", type=Path, help="write the walk to this JSON file")
    ap.add_argument("--load", type=Path, help="count a walk saved with --save instead of running one")
    args = ap.parse_args()
    if args.load:
        places = json.loads(args.load.read_text())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "spec.json"
            config.write_text(json.dumps(SPEC))
            places = walk(Path(tmp) / "run", config)
    if args.save:
        args.save.write_text(json.dumps(places, indent=0))
    if args.list:
        for p in places:
            print(f"{p['depth']} {'R' if p['reading'] is not None else ' '} {p['module']}:{p['function']}")
    print(json.dumps(report(places, args.depth)))


if __name__ == "__main__":
    main()
