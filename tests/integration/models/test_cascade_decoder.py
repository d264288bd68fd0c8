"""Cascade attention in the step decoder on tiny random models (no download, no mark).

Rows admitted through the prefix admitter keep only their private columns (suffix + generated) and
read their group's prefix once a step (models/decoding/cascade.py). Every steering operation the
suites use (fork, one-token and deep rollback, compaction, release and re-admission, export and
import) must give the tokens of the copy path, where each row holds the prefix itself; the copy
path is checked against each prompt prefilled alone in tests/integration/models/test_prefix_share_*.
Weights use initializer_range 0.3 so the tiny model's distributions are decisive (float noise
cannot flip an arg-max), as in tests/integration/models/test_architecture_parity.py.
"""

from __future__ import annotations

import pytest
import torch

from tamperbench.errors import UserError
from tamperbench.models.decoding import StepDecoder
from tamperbench.models.decoding import cascade as C
from tamperbench.models.prefix_share import PrefixAdmitter

V, P = 96, 40
COMMON = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.3, pad_token_id=0,
              bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
KV_BYTES_PER_TOKEN = 2 * 2 * 2 * 8 * 4  # keys + values, 2 layers, 2 kv heads, head_dim 32 / 4 = 8, float32


def _model(config_cls="LlamaConfig", **extra):
    import transformers as tf

    torch.manual_seed(0)
    return tf.AutoModelForCausalLM.from_config(getattr(tf, config_cls)(**COMMON, **extra), dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def llama():
    return _model()


def _prompts(suffixes=(1, 3, 7), alone=9):
    g = torch.Generator().manual_seed(1)
    pre = torch.randint(3, V, (P,), generator=g).tolist()
    out = [pre + torch.randint(3, V, (n,), generator=g).tolist() for n in suffixes]
    return out + [torch.randint(3, V, (alone,), generator=g).tolist()]


def _decoder(model, mode, monkeypatch, capacity=8):
    monkeypatch.setenv(C.ENV, mode)
    return StepDecoder(model, eos_ids=[2], capacity=capacity)


def _admit(dec, prompts):
    rows = dict(PrefixAdmitter(dec, prompts).admit(len(prompts)))
    return [next(r for r, i in rows.items() if i == k) for k in range(len(prompts))]


def _scenario(model, mode, monkeypatch):
    """Every steering operation on grouped rows; returns each row's tokens and the log-probs seen."""
    dec = _decoder(model, mode, monkeypatch)
    a, b, c, solo = _admit(dec, _prompts())
    lps = []

    def step(n=1, force=None):
        for _ in range(n):
            dec.step(force)
            lps.append(dec.pending_logprobs(dec.live_rows()).clone())

    step(3)
    forks = dec.fork(a, 2)  # the 1-token-suffix row, twice
    step(2)
    dec.rollback(b, 1)  # free one-token rollback
    dec.rollback(a, 5)  # deep, to the prompt: a 1-token suffix drops every private column
    dec.rollback(forks[0], 3)
    step(2, force={c: 5})
    snap = dec.export_row(c)  # a grouped row exported whole (prefix + private)
    dec.release([c, forks[1]])  # the next step compacts
    step(2)
    back = dec.import_rows(snap, 2)
    step(3)
    rows = [a, b, solo, forks[0], *back]
    return {i: dec.tokens(r) for i, r in enumerate(rows)}, lps, dec


def test_steering_operations_match_the_copy_path(llama, monkeypatch):
    cas, lp_cas, dec = _scenario(llama, "cascade", monkeypatch)
    assert dec.shared_prefix_attention == C.MODE and dec.cascade_rows == 3 and dec.cascade_steps == 12
    cop, lp_cop, dec_copy = _scenario(llama, "copy", monkeypatch)
    assert dec_copy.shared_prefix_attention is None and dec_copy.cascade_steps == 0
    assert cas == cop
    for x, y in zip(lp_cas, lp_cop, strict=True):
        assert torch.allclose(x, y, atol=1e-4)


def test_greedy_rows_equal_each_prompt_alone(llama, monkeypatch):
    prompts = _prompts(suffixes=(1, 2, 5, 11))
    dec = _decoder(llama, "cascade", monkeypatch)
    rids = _admit(dec, prompts)
    for _ in range(10):
        dec.step()
    for p, rid in zip(prompts, rids):
        alone = StepDecoder(llama, eos_ids=[2], capacity=1)
        [r] = alone.add_rows([p])
        for _ in range(10):
            alone.step()
        assert dec.generated(rid) == alone.generated(r)


def test_the_prefix_is_stored_once(llama, monkeypatch):
    """Shared bytes are one prefix whatever the rows; a grouped slot holds its suffix only; the
    prefix is freed with the group's last row; exporting a grouped row gives prefix + private."""
    held = []
    for k in (2, 6):
        dec = _decoder(llama, "cascade", monkeypatch)
        rids = _admit(dec, _prompts(suffixes=(3,) * k, alone=0)[:k])
        held.append(dec.kv.shared_bytes)
        assert dec.n == 3  # columns in the slots: the suffix only, not P + 3
        assert dec.kv.export(dec.by_id[rids[0]])[0][0].shape == (2, P + 3, 8)
        dec.release(rids[:-1])
        assert dec.kv.shared_bytes == held[-1]
        dec.release(rids[-1:])
        assert dec.kv.shared_bytes == 0 and not dec.kv.shared
    assert held == [KV_BYTES_PER_TOKEN * P] * 2


def test_sliding_window_model_falls_back_to_the_copy_path(monkeypatch):
    model = _model("MistralConfig", sliding_window=8)
    monkeypatch.delenv(C.ENV, raising=False)
    mode, why = C.cascade_mode(model)
    assert mode is None and "sliding-window" in why
    dec = StepDecoder(model, eos_ids=[2], capacity=8)
    assert dec.shared_prefix_attention is None and "sliding-window" in dec.cascade_fallback
    _admit(dec, _prompts())
    assert not dec.kv.shared and dec.n >= P + 7  # every row holds its prefix


def test_attention_outside_the_interface_falls_back(monkeypatch):
    """An attention module that calls its kernel directly would never see the prefix: copy path."""
    from transformers.models.llama.modeling_llama import LlamaAttention

    class DirectAttention(LlamaAttention):
        def forward(self, hidden_states, *args, **kwargs):  # no AttentionInterface dispatch
            return super().forward(hidden_states, *args, **kwargs)

    model = _model()
    assert C.cascade_mode(model)[0] == C.MODE
    for layer in model.model.layers:
        layer.self_attn.__class__ = DirectAttention
    mode, why = C.cascade_mode(model)
    assert mode is None and "AttentionInterface" in why


def test_the_switch_is_named_and_checked(llama, monkeypatch):
    monkeypatch.setenv(C.ENV, "copy")
    assert C.cascade_mode(llama) == (None, f"{C.ENV}=copy")
    monkeypatch.setenv(C.ENV, "fast")
    with pytest.raises(UserError, match=C.ENV):
        C.cascade_mode(llama)
