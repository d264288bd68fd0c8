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


def _tiny_smollm(real) -> object:
    """SmolLM2's tokenizer, chat template and layer/head layout (30 layers, 9 query / 3 KV heads) on
    random weights 64 wide: an engine-equivalence case that does not depend on the weights runs ~30x
    cheaper than on the real 135M model, and each such property keeps one real-model case beside it.
    Initializer 0.6 (not transformers' 0.02) so the next-token distributions are peaked enough that an
    intervention moves JS well above float rounding and greedy ties are rare."""
    import copy

    import torch
    import transformers as tf
    from transformers import AutoModelForCausalLM

    c = real.model.config
    cfg = tf.LlamaConfig(vocab_size=c.vocab_size, hidden_size=72, intermediate_size=144,
                         num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
                         num_key_value_heads=c.num_key_value_heads, max_position_embeddings=c.max_position_embeddings,
                         initializer_range=0.6,
                         pad_token_id=c.pad_token_id, bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    model.generation_config = copy.deepcopy(real.model.generation_config)
    tiny = copy.copy(real)
    tiny.model = model
    tiny.provenance = real.provenance.model_copy(update={"source": "tiny-random-smollm2", "sha256": "0" * 64})
    return tiny


@pytest.fixture(scope="session")
def tiny_smollm_backend(embedded_backend):
    """The embedded backend's tokenizer and template around a random 72-wide model of SmolLM2's shape."""
    return _tiny_smollm(embedded_backend)
