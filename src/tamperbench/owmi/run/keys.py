"""Which records an OWMI spec will write, keyed before any compute: the items each benchmark
contributes, a unit's design coordinates and every record key a unit writes.

Below both the runner (owmi/run/runner.py, which writes the records) and the plan (owmi/run/plan.py, which
counts what is pending for ``--dry-run`` and the bars), so neither imports the other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tamperbench.errors import UserError
from tamperbench.owmi.run.spec import OwmiSpec
from tamperbench.store import trial_key

__all__ = ["load_items", "planned_keys", "unit_coords"]


def load_items(benchmark: str, n: int):
    if benchmark == "builtin":
        from tamperbench.owmi.run.items import quick_items

        return quick_items(-(-n // 3))[:n]
    from tamperbench.owmi.run.anchor_items import ANCHOR_BENCHMARK, anchor_items

    if benchmark == ANCHOR_BENCHMARK:
        return anchor_items(n)
    from tamperbench.tasks.load import load

    items = load(benchmark, hub=False).items
    if not items:
        raise UserError(f"benchmarks: {benchmark!r} has no items")
    return items[:n]


def unit_coords(spec: OwmiSpec, model: str, bench: str, obj, op, item, seed: int) -> dict:
    return dict(model=model, benchmark=bench, object=obj.model_dump(mode="json"), operator=op.name, dose=op.dose,
                item=item.id, seed=seed, positions=spec.positions, when=spec.when, readout=spec.readout)


def planned_keys(spec: OwmiSpec, coords: dict, observers: Sequence[str]) -> list[tuple[str, str, dict]]:
    """(key, pair_id, design fields) of every record a unit writes."""
    out = []
    for track in spec.tracks:
        fams = ("spontaneous",) if track == "C" else spec.probes
        for fam in fams:
            for scope in spec.scopes:
                pair = dict(coords, track=track, probe=fam, scope=scope)
                pair_id = trial_key(pair)[:24]
                for cond in spec.conditions:
                    d: dict[str, Any]
                    if cond != "observer":
                        d = dict(condition=cond, observer_tier=None, observer_model=None)
                        out.append((trial_key({**pair, **d}), pair_id, {**d, "track": track, "probe": fam, "scope": scope}))
                        continue
                    for tier, name in [(1, coords["model"]), *[(2, o) for o in observers]]:
                        d = dict(condition=cond, observer_tier=tier, observer_model=name)
                        out.append((trial_key({**pair, **d}), pair_id, {**d, "track": track, "probe": fam, "scope": scope}))
    return out
