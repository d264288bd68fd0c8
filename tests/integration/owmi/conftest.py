"""Shared fixtures of the OWMI integration tests."""

from __future__ import annotations

import pytest


def _run_one_unit(backend, spec):
    """One item of ``spec``'s first cell through the runner's batched engine, as ``owmi run`` does
    (per context frame -- Track C runs without the introspection system prompt -- prepare, impact
    effects, execute): returns (engine, the first frame's unit, item, record dicts)."""
    from tamperbench.owmi.engine import MODEL_CONDITIONS, Cell, Engine
    from tamperbench.owmi.items import quick_items
    from tamperbench.owmi.runner import unit_coords, _effects, _execute, planned_keys

    eng = Engine(backend, spec, [])
    cell = Cell("embedded", "builtin", spec.objects[0], spec.operators[0])
    item = quick_items(1)[0]
    all_keys = planned_keys(spec, unit_coords(spec, "embedded", "builtin", cell.obj, cell.op, item, 0), [])
    units, rows = [], []
    for frame, tracks in spec.frames().items():
        unit = eng.prepare(cell, item, 0, 0, frame)
        keys = [k for k in all_keys if k[2]["track"] in tracks]
        _effects(eng, spec, unit, keys, MODEL_CONDITIONS)
        rows += [r.model_dump() for g in _execute(eng, spec, unit, keys, "prov", backend, []) for r in g]
        units.append(unit)
    return eng, units[0], item, rows


@pytest.fixture(scope="session")
def run_one_unit():
    """``eng, unit, item, rows = run_one_unit(backend, spec)``: see :func:`_run_one_unit`."""
    return _run_one_unit
