"""The newcomer's walk through ``owmi run``: places, modules and turn-backs of a tiny run.

Why: a reader follows a spec through ``owmi run`` by opening each function the first time the run
calls it. This runs a tiny ``owmi run`` in this process (the CLI's own ``run`` command, embedded
model) under ``sys.setprofile`` and keeps every call into a ``tamperbench.owmi`` function, in the
order each function is first entered -- the reading order. From that walk it counts:

* places: distinct functions entered (comprehensions, lambdas and generator expressions are part of
  the function that holds them and are not counted);
* modules: distinct modules those functions live in;
* turn-backs: how often the walk enters a module it had already visited and then left.

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


def walk(out: Path, config: Path) -> list[tuple[str, str]]:
    """The (module, function) first-visit order of ``owmi run --config config --out out``."""
    from tamperbench.cli import main

    seen: dict[tuple[str, str], None] = {}

    def prof(frame, event, arg):
        if event != "call":
            return
        mod = frame.f_globals.get("__name__", "")
        if not mod.startswith("tamperbench.owmi"):
            return
        name = frame.f_code.co_qualname
        if any(s in name for s in SKIP):
            return
        seen.setdefault((mod, name), None)

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
    return list(seen)


def counts(places: list[tuple[str, str]]) -> dict:
    modules: list[str] = []
    turn_backs = 0
    for mod, _ in places:
        if modules and modules[-1] == mod:
            continue
        if mod in modules:
            turn_backs += 1
        modules.append(mod)
    return dict(places=len(places), modules=len(set(modules)), turn_backs=turn_backs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the walk, one place a line")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "spec.json"
        config.write_text(json.dumps(SPEC))
        places = walk(Path(tmp) / "run", config)
    if args.list:
        for mod, name in places:
            print(f"{mod}:{name}")
    print(json.dumps(counts(places)))


if __name__ == "__main__":
    main()
