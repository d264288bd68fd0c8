"""The batched engine writes the records the one-condition-at-a-time engine writes.

Reference: ``ReferenceEngine``, which answers the task, probes every track, asks the
observer and teacher-forces the effects one condition (and one probe family) at a time, on
unpadded batch-of-one caches. The batched engine runs the same unit with the conditions as rows
of one batch (forked shared prefix, ragged rows, row-targeted hooks, finished rows compacted
away). Every record field must match: greedy tokens and texts exactly; the teacher-forced numbers
within float rounding of batched kernels (JS: 1e-5 nats absolute; log-probs and norms 1e-4
absolute, on values of order 1-100), the tolerances being what float32 matrix products over
differently shaped batches can move, far below any effect the analysis reads.

Two cells: a concept added to the residual stream at prefill only, and seeded noise on one
attention head at every step (hooks active in decoding and probes, and noise keyed by position,
so it cannot depend on how many forwards ran before).
"""

from __future__ import annotations

import math

import pytest

from tamperbench.owmi.engine.base import Engine
from tamperbench.owmi.engine.batched import BatchedEngine
from tamperbench.owmi.engine.reference import ReferenceEngine
from tamperbench.owmi.engine.unit import Cell
from tamperbench.owmi.run.runner import unit_records
from tamperbench.owmi.run.spec import quick_items
from tamperbench.owmi.run.plan import planned_keys, unit_coords
from tamperbench.owmi.run.spec import quick_spec

pytestmark = pytest.mark.model
LOOSE = {"js_mean": 1e-5, "js_max": 1e-5}
SKIP = {"seconds", "created_at"}


def _records(backend, spec, item, batched: bool) -> tuple[dict, Engine]:
    eng = (BatchedEngine if batched else ReferenceEngine)(backend, spec, [])
    cell = Cell("embedded", "builtin", spec.objects[0], spec.operators[0])
    unit = eng.prepare(cell, item, 0, 0)
    unit.eta = 1.7 * unit.norm_unit  # impact matching itself is shared code; any fixed norm will do
    unit.match = (0.1, 0.1)
    keys = planned_keys(spec, unit_coords(spec, "embedded", "builtin", cell.obj, cell.op, item, 0), [])
    recs = unit_records(eng, unit, keys, provenance_id="prov")
    return {r.key: r.model_dump() for r in recs}, eng


ALL_TRACKS = ["A", "B_visible", "B_masked", "B_delayed", "C"]


ALL_CONDITIONS = ["intervention", "sham", "random_unit", "random_matched", "observer"]


@pytest.mark.parametrize("model, obj, op, when, tracks, probes, positions, conditions", [
    # the real model: Track A, the visible answer and the system-prompt frame, every condition (the observer too)
    ("embedded", {"kind": "resid_post", "layer": 12}, {"name": "add", "dose": 64.0}, "prefill", ["A", "B_visible", "C"],
     ["detection"], "task", ALL_CONDITIONS),
    # the same property on random weights of SmolLM2's shape (conftest's tiny_smollm_backend): the engines'
    # batching does not depend on the weights, and the real model keeps the cases before and after this one.
    # Every track here, the masked and delayed ones only here (they share Track A's and B_visible's batching)
    ("tiny", {"kind": "head", "layer": 5, "head": 2}, {"name": "noise", "dose": 4.0}, "every_step", ALL_TRACKS,
     ["detection", "characterization"], "task", ALL_CONDITIONS),
    # the ragged path: B_visible with every position before the probe declared ("all"), so the rows
    # of one batch differ in length (each condition reads its own answer) and are hooked from
    # position 0 (no unhooked prefix to fork); noise is keyed by absolute position, so a row
    # whose positions were counted wrongly draws other noise. Two hooked conditions of different
    # lengths (so one of them is left-padded) and the sham; no observer, one probe: kept short.
    ("embedded", {"kind": "resid_post", "layer": 12}, {"name": "noise", "dose": 4.0}, "prefill", ["B_visible"],
     ["detection"], "all", ["intervention", "sham", "random_unit"]),
])
def test_batched_records_equal_one_at_a_time(request, model, obj, op, when, tracks, probes, positions, conditions):
    backend = request.getfixturevalue("embedded_backend" if model == "embedded" else "tiny_smollm_backend")
    spec = quick_spec(objects=[obj], operators=[op], seeds=[0], when=when, items_per_benchmark=1, tracks=tracks, probes=probes,
                      task_max_new_tokens=8, probe_max_new_tokens=6, reflection_max_new_tokens=6,
                      observer_classifier=False, positions=positions, conditions=conditions)
    item = quick_items(1)[0]
    ref, _ = _records(backend, spec, item, batched=False)
    got, eng = _records(backend, spec, item, batched=True)
    n_cells = sum(1 if t == "C" else len(probes) for t in tracks)
    assert set(got) == set(ref) and len(ref) == n_cells * 2 * len(conditions)  # x scopes x conditions
    for key, want in ref.items():
        have = got[key]
        for name, value in want.items():
            if name in SKIP:
                continue
            if isinstance(value, float) and not isinstance(value, bool):
                tol = LOOSE.get(name, 1e-4 * max(1.0, abs(value)))
                assert have[name] is not None and math.isclose(have[name], value, abs_tol=tol), \
                    (name, want["track"], want["condition"], have[name], value)
            else:
                assert have[name] == value, (name, want["track"], want["condition"], want["probe_family"],
                                             want["hook_scope"], have[name], value)
    # the check is not vacuous: the intervention changed something the records show
    model_rows = [r for r in ref.values() if r["condition"] == "intervention"]
    assert all(r["js_mean"] > 1e-4 for r in model_rows)
    if positions == "all":  # ragged: the conditions' B_visible contexts differ in length, all declared from 0
        lengths = {r["condition"]: len(r["prompt_ids"]) for r in ref.values() if r["condition"] != "observer"}
        assert lengths["intervention"] != lengths["random_unit"], lengths  # a hooked row is padded
        assert all(r["intervened_positions"][0] == 0 for r in model_rows)
    sham = [r for r in got.values() if r["condition"] == "sham"]
    assert all(r["js_mean"] == 0.0 for r in sham), "the sham row is computed exactly as the baseline row"
