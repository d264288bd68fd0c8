"""OWMI's calibration batch split by memory (``BatchedEngine.calibration_groups``), on the real
embedded model: a cell whose units do not fit at once runs as groups of units, and Eq. 7's
E[D(eta)] is the same mean over units as one batch and as the one-forward-per-unit reference (to
the float rounding the batched path is already held to, 1e-4 relative).

The free-memory reading (``memory.free_bytes``) is replaced by a fixed figure: it is the one
machine-dependent input, and a figure where two rows fit forces the split on any machine.
"""

from __future__ import annotations

import pytest

from tamperbench.models import memory as M
from tamperbench.owmi.engine import forward as fw
from tamperbench.owmi.engine.batched import BatchedEngine as Engine
from tamperbench.owmi.engine.unit import Cell
from tamperbench.owmi.run.spec import quick_items
from tamperbench.owmi.run.spec import quick_spec

pytestmark = pytest.mark.model
REL = 1e-4


@pytest.fixture(scope="module")
def cell(embedded_backend):
    spec = quick_spec(operators=[{"name": "noise", "dose": 4.0}], seeds=[0], task_max_new_tokens=4, calibration_steps=2,
                      calibration="batched", observer_classifier=False)
    eng = Engine(embedded_backend, spec, [])
    c = Cell("embedded", "builtin", spec.objects[0], spec.operators[0])
    units = [eng.prepare(c, it, i, 0) for i, it in enumerate(quick_items(1))]
    for u in units:  # the path where the baseline's log-probs are not kept: a baseline row per unit
        u.base_chunks = None
    return eng, units


def test_units_split_by_memory_give_the_same_mean_js(cell, monkeypatch):
    eng, units = cell
    assert len(units) == 3 and all(u.base_chunks is None for u in units)  # two rows a unit
    eta = 2.0 * units[0].norm_unit
    whole = eng.mean_js_rows(units, eta)
    assert (eng.calibration_batch.rows, eng.calibration_batch.by) == (6, "work")  # this machine: all at once
    length = max(len(u.task.ids) + len(u.base_ids) for u in units)
    js, vocab = eng.spec.js_chunk, eng.model.config.vocab_size
    two = M.ragged_footprint(eng.model, 2, length=length, block=js // 2, vocab_floats=3 * js * vocab)
    monkeypatch.setattr(M, "free_bytes", lambda device: 2 * two)  # exactly two rows fit
    assert [len(g) for g in eng.calibration_groups(units)] == [1, 1, 1]
    split = eng.mean_js_rows(units, eta)
    assert (eng.calibration_batch.rows, eng.calibration_batch.by, eng.calibration_batch.prompt_len) == (2, "memory", length)
    ref = 0.0
    for u in units:  # the sequential path's formula, one forward pair per unit
        u.eta = eta
        ref += fw.js_divergence(eng.model, u.task.ids + u.base_ids, min(u.task.declared),
                                eng.make_iv(u, "random_matched", u.task.declared), chunk=js)[0]
    ref /= len(units)
    assert split == pytest.approx(whole, rel=REL) and split == pytest.approx(ref, rel=REL) and ref > 0
