"""Cascade attention reads every live group's prefix in one call per layer (PaddedPrefixes).

Why this file: the per-group calls it replaced made 300 small calls a step for Exact Words'
ten documents. What must hold: (1) one fused prefix call per layer whatever the number of groups;
(2) a shorter prefix's padding is masked, so what the padding holds cannot reach any row; (3) one
group is neither copied nor padded and its numbers are the per-group call's bit for bit (the
``depth`` preset's case); (4) in the step decoder, rows of several groups with prefixes of different lengths give
each prompt's greedy tokens decoded alone, and the stacked prefixes are kept while the live groups
stay the same and rebuilt when one ends. Tiny random llama (no download), as test_cascade_decoder.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tamperbench.models.decoding import StepDecoder
from tamperbench.models.decoding import cascade as C
from tamperbench.models.prefix_share import PrefixAdmitter

V = 96
COMMON = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.3, pad_token_id=0,
              bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)


def _tensors(seed, lens=(11, 4, 7), b=7, heads=9, kvh=3, d=16, n=6):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, heads, 1, d, generator=g)
    k = torch.randn(b, kvh, n, d, generator=g)
    v = torch.randn(b, kvh, n, d, generator=g)
    mask = torch.rand(b, n, generator=g) > 0.3
    mask[:, -1] = True
    prefixes = [C.SharedPrefix([(torch.randn(1, kvh, p, d, generator=g), torch.randn(1, kvh, p, d, generator=g))])
                for p in lens]
    return q, k, v, mask, prefixes


def _groups(prefixes, slots):
    return [(torch.tensor(s), p) for s, p in zip(slots, prefixes)]


def _one_by_one(q, k, v, mask, groups):
    """The per-group computation the fused call replaced: one CascadeStep per group (one group each)."""
    out = C.cascade_attention(SimpleNamespace(layer_idx=0), q, k, v, None, cascade_step=C.CascadeStep([], mask))[0]
    out = out.clone()
    for idx, prefix in groups:
        one = C.cascade_attention(SimpleNamespace(layer_idx=0), q, k, v, None,
                                  cascade_step=C.CascadeStep([(idx, prefix)], mask))[0]
        out[idx] = one[idx]
    return out


def _per_group_formula(q, k, v, mask, groups):
    """The per-group loop this replaced, written out (one _attend and one merge per group)."""
    b, heads, _, d = q.shape
    kvh = k.shape[1]
    g = heads // kvh
    qf = q.reshape(b, kvh, g, d)
    cm = torch.zeros(mask.shape).masked_fill_(~mask, float("-inf"))
    o, lse = C._attend(qf, k, v, d ** -0.5, cm[:, None, None, :])
    for idx, prefix in groups:
        kp, vp = prefix.kv[0]
        r = len(idx)
        qg = qf[idx].transpose(0, 1).reshape(1, kvh, r * g, d)
        op, lp = (t[0].reshape(kvh, r, g, -1).transpose(0, 1) for t in C._attend(qg, kp, vp, d ** -0.5))
        both = torch.logaddexp(lse[idx], lp)
        o[idx] = o[idx] * torch.exp(lse[idx] - both) + op * torch.exp(lp - both)
        lse[idx] = both
    return o.reshape(b, heads, 1, d).transpose(1, 2)


def test_one_prefix_call_per_layer_whatever_the_groups(monkeypatch):
    calls = []
    real = C._attend
    monkeypatch.setattr(C, "_attend", lambda *a, **kw: calls.append(a[1].shape) or real(*a, **kw))
    q, k, v, mask, prefixes = _tensors(0)
    C.cascade_attention(SimpleNamespace(layer_idx=0), q, k, v, None,
                        cascade_step=C.CascadeStep(_groups(prefixes, [[0, 2], [1, 5, 6], [3]]), mask))
    # the private columns, then all three prefixes stacked (3 groups, padded to the longest, 11)
    assert calls == [(7, 3, 6, 16), (3, 3, 11, 16)]


def test_padded_groups_equal_the_per_group_calls_and_padding_is_masked():
    q, k, v, mask, prefixes = _tensors(1)
    groups = _groups(prefixes, [[0, 2], [1, 5, 6], [3]])  # slot 4 has no group
    step = C.CascadeStep(groups, mask)
    fused = C.cascade_attention(SimpleNamespace(layer_idx=0), q, k, v, None, cascade_step=step)[0]
    assert torch.allclose(fused, _one_by_one(q, k, v, mask, groups), atol=1e-6, rtol=0)
    assert step.padded.mask is not None and step.padded.nbytes == 2 * 3 * 3 * 11 * 16 * 4
    # what sits in the padding never reaches a row: poison it, same numbers
    kp, vp = step.padded.layer(0)
    kp[1, :, 4:] = 1e4
    vp[1, :, 4:] = -1e4
    again = C.cascade_attention(SimpleNamespace(layer_idx=0), q, k, v, None,
                                cascade_step=C.CascadeStep(groups, mask, step.padded))[0]
    assert torch.equal(again, fused)


@pytest.mark.parametrize("slots", [[[0, 3, 4]], [[0, 1, 2, 3, 4, 5, 6]]])
def test_one_group_is_bitwise_the_per_group_call(slots):
    q, k, v, mask, prefixes = _tensors(2, lens=(9,))
    groups = _groups(prefixes, slots)  # some slots ungrouped / every slot grouped (no gather)
    step = C.CascadeStep(groups, mask)
    fused = C.cascade_attention(SimpleNamespace(layer_idx=0), q, k, v, None, cascade_step=step)[0]
    assert step.padded.mask is None and step.padded.nbytes == 0  # its own tensors, no copy
    assert torch.equal(fused, _per_group_formula(q, k, v, mask, groups))


def test_groups_of_one_length_are_stacked_unpadded():
    q, k, v, mask, prefixes = _tensors(2, lens=(5, 5))
    groups = _groups(prefixes, [[0, 3, 4], [1, 6]])
    step = C.CascadeStep(groups, mask)
    fused = C.cascade_attention(SimpleNamespace(layer_idx=0), q, k, v, None, cascade_step=step)[0]
    assert step.padded.mask is None and step.padded.nbytes == 2 * 3 * 2 * 5 * 16 * 4
    assert torch.allclose(fused, _one_by_one(q, k, v, mask, groups), atol=1e-6, rtol=0)


def test_decoder_groups_of_different_prefix_lengths_equal_each_prompt_alone(monkeypatch):
    import transformers as tf

    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(tf.LlamaConfig(**COMMON), dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(3)
    rand = lambda n: torch.randint(3, V, (n,), generator=g).tolist()  # noqa: E731
    docs = [rand(40), rand(23)]
    prompts = [docs[0] + rand(2), docs[1] + rand(5), docs[0] + rand(6), docs[1] + rand(1), docs[0] + rand(3)]
    monkeypatch.setenv(C.ENV, "cascade")
    dec = StepDecoder(model, eos_ids=[2], capacity=8)
    rows = dict(PrefixAdmitter(dec, prompts).admit(len(prompts)))
    rid = {i: r for r, i in rows.items()}
    assert dec.kv.groups_registered == 2
    dec.step()
    padded = C._PADDED[dec]
    assert padded.mask is not None and [p.length for p in padded.prefixes] in ([40, 23], [23, 40])
    for _ in range(5):
        dec.step()
    assert C._PADDED[dec] is padded  # kept while the same groups are live
    dec.release([rid[1], rid[3]])  # the 23-token document's group ends
    for _ in range(2):
        dec.step()
    assert C._PADDED[dec] is not padded and C._PADDED[dec].mask is None
    for i in (0, 2, 4):
        alone = StepDecoder(model, eos_ids=[2], capacity=1)
        [r] = alone.add_rows([prompts[i]])
        for _ in range(8):
            alone.step()
        assert dec.generated(rid[i]) == alone.generated(r)
    assert dec.shared_prefix_attention == "cascade-tree" and dec.cascade_steps == 8
