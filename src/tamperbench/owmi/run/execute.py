"""One unit's records, batch by batch: the engine says which batches a track has, this writes them.

Why records are committed per *batch* (group), not per unit: a unit (cell, item, seed) runs for
minutes (every track, probe, scope, condition and observer). Its records are written as soon as the
batch that computes them finishes, each batch in one transaction, so a run killed at any moment
loses at most the batch in flight. Which batches there are is the engine's (``Engine.group``): the
batched engine computes one track's model conditions x scopes x probe families as one batch and one
observer tier of a track as another; the reference engine a delayed or visible track per condition
and the observer per probe family. On resume a batch whose keys are all stored is not recomputed; a
batch is computed exactly as in an uninterrupted run (same batch rows), so resumed records equal
the ones an uninterrupted run writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from tamperbench.owmi.protocol.records import OwmiRun
from tamperbench.owmi.run.record import build, result_of


def records(ctx, unit, keys: list, on_tokens: Callable[[int], None] | None = None) -> Iterator[list[OwmiRun]]:
    """The records of ``keys`` (one unit's unstored keys), one list per batch as soon as the batch
    finishes; batches with no key in ``keys`` are not computed. ``on_tokens`` gets each batch's
    answer tokens, one answer per record (the bar's ETA)."""
    eng, spec = ctx.engine, ctx.spec
    want: dict[tuple, list] = {}
    for k in keys:
        want.setdefault(eng.group(k[2]), []).append(k)

    def done(group, res) -> list[OwmiRun]:
        if on_tokens is not None:
            on_tokens(sum(len(result_of(res, d)[3][0]) for _, _, d in want[group]))
        return [build(ctx, unit, k, res) for k in want[group]]

    tiers = [(1, unit.cell.model, ctx.backend), *[(2, o, ob) for o, ob in ctx.observers]]
    for track in spec.tracks:
        for group, compute in eng.probe_batches(unit, track):
            if group in want:
                t = time.perf_counter()
                got = compute()
                dt = (time.perf_counter() - t) / max(len(got), 1)
                yield done(group, {(track, fam, scope, c, None): (*v, dt) for (c, fam, scope), v in got.items()})
        if "observer" not in spec.conditions:
            continue
        for tier, name, backend in tiers:
            for group, compute in eng.observer_batches(unit, track, tier, backend):
                if group in want:
                    t = time.perf_counter()
                    obs = compute()
                    dt = (time.perf_counter() - t) / max(len(obs), 1)
                    yield done(group, {(track, fam, scope, "observer", tier): (text, ids, [], resp, dt, probe3, name)
                                       for fam, (text, ids, probe3, resp) in obs.items() for scope in spec.scopes})


def unit_records(engine, unit, keys: list, *, provenance_id: str) -> list[OwmiRun]:
    """One prepared unit's records of ``keys`` outside a run directory (the engine tests and
    benchmarks): its teacher-forced effects, then every batch, as ``owmi run`` computes them."""
    from tamperbench.owmi.run.context import RunContext

    ctx = RunContext(spec=engine.spec, model=unit.cell.model, backend=engine.b, observers=list(engine.observers),
                     engine=engine, store=None, provenance_id=provenance_id)
    engine.fill_effects(unit, {d["condition"] for _, _, d in keys})
    return [r for batch in records(ctx, unit, keys) for r in batch]
