"""Shared fixtures of the OWMI integration tests."""

from __future__ import annotations

import pytest


def _run_one_unit(backend, spec, engine=None):
    """One item of ``spec``'s first cell through the engine ``owmi run`` picks (or the ``engine``
    class given), as ``owmi run`` does (per context frame -- Track C runs without the introspection
    system prompt -- prepare, impact effects, execute): returns (engine, the first frame's unit,
    item, record dicts)."""
    from tamperbench.owmi.engine import engine_for
    from tamperbench.owmi.engine.unit import Cell
    from tamperbench.owmi.protocol.design import frames
    from tamperbench.owmi.run.runner import unit_records
    from tamperbench.owmi.run.spec import quick_items
    from tamperbench.owmi.run.plan import planned_keys, unit_coords

    eng = engine_for(backend, spec, []) if engine is None else engine(backend, spec, [])
    cell = Cell("embedded", "builtin", spec.objects[0], spec.operators[0])
    item = quick_items(1)[0]
    all_keys = planned_keys(spec, unit_coords(spec, "embedded", "builtin", cell.obj, cell.op, item, 0), [])
    units, rows = [], []
    for frame, tracks in frames(spec.tracks, spec.track_c_system).items():
        unit = eng.prepare(cell, item, 0, 0, frame)
        keys = [k for k in all_keys if k[2]["track"] in tracks]
        rows += [r.model_dump() for r in unit_records(eng, unit, keys, provenance_id="prov")]
        units.append(unit)
    return eng, units[0], item, rows


@pytest.fixture(scope="session")
def run_one_unit():
    """``eng, unit, item, rows = run_one_unit(backend, spec)``: see :func:`_run_one_unit`."""
    return _run_one_unit
