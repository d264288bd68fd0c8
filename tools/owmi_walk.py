"""The newcomer's walk through ``owmi run``: places, modules and turn-backs of a tiny run.

Why: a reader follows a spec through ``owmi run`` by opening each function the first time the run
calls it. This runs a tiny ``owmi run`` in this process (the CLI's own ``run`` command, embedded
model) under ``sys.setprofile`` and keeps every call into a ``tamperbench.owmi`` function, in the
order each function is first entered -- the reading order. From that walk it counts:

* places: distinct functions entered (comprehensions, lambdas and generator expressions are part of
  the function that holds them, and methods a decorator generates -- a dataclass's ``__init__`` -- have
  no source to read: neither is counted; nor is ``tamperbench.owmi``'s own ``__init__``, the import
  hook of old module paths);
* modules: distinct modules those functions live in;
* turn-backs: how often the walk enters a module it had already visited and then left.

Each is printed for the whole walk and for the top of the call tree (``--depth``, default 3: the
functions at most that many tamperbench.owmi calls below the command, the orchestration a newcomer
reads before the leaves).

Usage (from the repository root, with PYTHONPATH pointing at the ``src`` to measure)::

    python tools/owmi_walk.py                    # the numbers
    python tools/owmi_walk.py --list             # and the walk itself, one place a line
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

SPEC = dict(  # the quick preset's axes at their smallest: every condition, one cell, two tracks
    models=["embedded"], benchmarks=["builtin"], items_per_benchmark=1, seeds=[0],
    objects=[{"kind": "resid_post", "layer": 12}], operators=[{"name": "add", "dose": 16.0}],
    tracks=["A", "B_delayed"], probes=["detection", "localization"], task_max_new_tokens=4, probe_max_new_tokens=4,
    reflection_max_new_tokens=4, calibration_steps=2, readout="choice",
)
SKIP = ("<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<module>")


def walk(out: Path, config: Path) -> list[tuple[str, str, int]]:
    """The (module, function, depth) first-visit order of ``owmi run --config config --out out``;
    depth: how many tamperbench.owmi functions are on the stack, this one included."""
    from tamperbench.cli import main

    seen: dict[tuple[str, str], int] = {}
    stack: list = []

    def prof(frame, event, arg):
        if event == "return":
            if stack and stack[-1] is frame:
                stack.pop()
            return
        if event != "call":
            return
        mod = frame.f_globals.get("__name__", "")
        if not mod.startswith("tamperbench.owmi.") or not frame.f_code.co_filename.endswith(".py"):
            return
        name = frame.f_code.co_qualname
        if any(s in name for s in SKIP):
            return
        stack.append(frame)
        seen.setdefault((mod, name), len(stack))

    argv = sys.argv
    sys.argv = ["tamperbench", "owmi", "run", "--config", str(config), "--out", str(out), "--new"]
    sys.setprofile(prof)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the run's summary table is not the walk
            main()
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
    finally:
        sys.setprofile(None)
        sys.argv = argv
    return [(mod, name, depth) for (mod, name), depth in seen.items()]


def counts(places: list[tuple[str, str, int]], depth: int | None = None) -> dict:
    places = [p for p in places if depth is None or p[2] <= depth]
    modules: list[str] = []
    turn_backs = 0
    for mod, _, _ in places:
        if modules and modules[-1] == mod:
            continue
        if mod in modules:
            turn_backs += 1
        modules.append(mod)
    return dict(places=len(places), modules=len(set(modules)), turn_backs=turn_backs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the walk, one place a line")
    ap.add_argument("--depth", type=int, default=3, help="the top of the call tree: places at most this deep")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "spec.json"
        config.write_text(json.dumps(SPEC))
        places = walk(Path(tmp) / "run", config)
    if args.list:
        for mod, name, depth in places:
            print(f"{depth} {mod}:{name}")
    print(json.dumps({"whole walk": counts(places), f"depth <= {args.depth}": counts(places, args.depth)}))


if __name__ == "__main__":
    main()
