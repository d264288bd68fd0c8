"""The batched engine's teacher-forced effects compute the baseline once per unit and never run the
sham row: a sham's hook writes nothing back (``Intervention.identity``), so its row would be the
baseline's. The effects still equal the one-at-a-time reference engine's, which runs both (real
embedded model; JS within 1e-5, log-probs within 1e-4 relative)."""

from __future__ import annotations

import math

import pytest

from tamperbench.owmi.engine.batched import BASE, BatchedEngine
from tamperbench.owmi.engine.reference import ReferenceEngine
from tamperbench.owmi.engine.unit import MODEL_CONDITIONS, Cell
from tamperbench.owmi.run.items import quick_items
from tamperbench.owmi.run.spec import quick_spec

pytestmark = pytest.mark.model


def _effects(engine_cls, backend, spec, spy: list | None = None) -> dict:
    eng = engine_cls(backend, spec, [])
    if spy is not None:
        real = eng.prefix.rows

        def rows(model, rows_ids, first, rids):
            spy.append(list(rids))
            return real(model, rows_ids, first, rids)

        eng.prefix.rows = rows
    cell = Cell("embedded", "builtin", spec.objects[0], spec.operators[0])
    unit = eng.prepare(cell, quick_items(1)[0], 0, 0)
    eng.fill_effects(unit, set(MODEL_CONDITIONS))
    return unit.effects


def test_baseline_once_and_no_sham_row_and_the_references_effects(embedded_backend):
    spec = quick_spec(readout="choice", seeds=[0], items_per_benchmark=1, operators=[{"name": "add", "dose": 64.0}],
                      task_max_new_tokens=4, conditions=[*MODEL_CONDITIONS, "observer"])
    batches: list = []
    got = _effects(BatchedEngine, embedded_backend, spec, batches)
    # the baseline's row once (its gold-answer log-prob; its JS log-probs are kept unbatched), the sham's never
    assert sum(BASE in rids for rids in batches) == 1 and not any("sham" in rids for rids in batches), batches
    assert got["sham"]["js_mean"] == got["sham"]["js_max"] == got["sham"]["causal_effect"] == 0.0
    want = _effects(ReferenceEngine, embedded_backend, spec)
    for cond in MODEL_CONDITIONS:
        for name, value in want[cond].items():
            tol = 1e-5 if name.startswith("js_") and isinstance(value, float) else 1e-4 * max(1.0, abs(value))
            assert math.isclose(got[cond][name], value, abs_tol=tol), (cond, name, got[cond][name], value)
