"""Cascade attention (models/decoding/cascade.py) against one softmax over the concatenated keys.

The reference is torch's own ``scaled_dot_product_attention`` over each row's prefix columns
followed by its private columns, with the 2-D column mask: the attention the copy path computes.
Random tensors, no model: grouped-query heads (9 query heads over 3 kv heads, as SmolLM2), two
groups of different prefix lengths, a row with no group, masked holes in the private columns.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tamperbench.models.decoding import cascade as C


def _case(seed=0, heads=9, kvh=3, d=16, n=6):
    g = torch.Generator().manual_seed(seed)
    b = 5
    q = torch.randn(b, heads, 1, d, generator=g)
    k = torch.randn(b, kvh, n, d, generator=g)
    v = torch.randn(b, kvh, n, d, generator=g)
    mask = torch.rand(b, n, generator=g) > 0.4
    mask[:, -1] = True  # the step's own column
    prefixes = [C.SharedPrefix([(torch.randn(1, kvh, p, d, generator=g), torch.randn(1, kvh, p, d, generator=g))])
                for p in (11, 4)]
    groups = {0: 0, 1: 1, 2: 0, 3: None, 4: 0}  # slot -> prefix (3: no group)
    return q, k, v, mask, prefixes, groups


def _reference(q, k, v, mask, prefixes, groups, scale):
    outs = []
    heads, kvh = q.shape[1], k.shape[1]
    for s in range(q.shape[0]):
        ks, vs, ms = k[s], v[s], mask[s]
        if groups[s] is not None:
            pk, pv = prefixes[groups[s]].kv[0]
            ks, vs = torch.cat([pk[0], ks], 1), torch.cat([pv[0], vs], 1)
            ms = torch.cat([torch.ones(pk.shape[2], dtype=torch.bool), ms])
        ks, vs = ks.repeat_interleave(heads // kvh, 0), vs.repeat_interleave(heads // kvh, 0)  # transformers' repeat_kv
        outs.append(torch.nn.functional.scaled_dot_product_attention(q[s], ks, vs, attn_mask=ms[None, None], scale=scale))
    return torch.stack(outs).transpose(1, 2)  # (b, 1, H, d)


def _step(mask, prefixes, groups):
    by = {}
    for s, gi in groups.items():
        if gi is not None:
            by.setdefault(gi, []).append(s)
    return C.CascadeStep([(torch.tensor(slots), prefixes[gi]) for gi, slots in by.items()], mask)


@pytest.mark.parametrize("scale", [None, 0.3])
def test_cascade_equals_one_softmax_over_prefix_and_private(scale):
    q, k, v, mask, prefixes, groups = _case()
    step = _step(mask, prefixes, groups)
    out, weights = C.cascade_attention(SimpleNamespace(layer_idx=0), q, k, v, None, scaling=scale, cascade_step=step)
    ref = _reference(q, k, v, mask, prefixes, groups, q.shape[-1] ** -0.5 if scale is None else scale)
    assert weights is None and out.shape == (5, 1, 9, 16)
    assert torch.allclose(out, ref, atol=1e-5, rtol=1e-5)
    assert step.calls == 1 and step.layers == {0}


def test_a_row_reads_its_own_group_prefix_only():
    """Swapping the two groups' prefixes changes exactly the rows of those groups (not the ungrouped row)."""
    q, k, v, mask, prefixes, groups = _case(seed=1)
    mod = SimpleNamespace(layer_idx=0)
    out = C.cascade_attention(mod, q, k, v, None, cascade_step=_step(mask, prefixes, groups))[0]
    swapped = C.cascade_attention(mod, q, k, v, None, cascade_step=_step(mask, prefixes[::-1], groups))[0]
    changed = [(out[s] - swapped[s]).abs().max().item() > 1e-3 for s in range(5)]
    assert changed == [True, True, True, False, True]


def test_plain_ops_path_equals_the_fused_cpu_kernel(monkeypatch):
    """The non-CPU path (plain matmul + logsumexp) gives the fused kernel's numbers."""
    q, k, v, mask, prefixes, groups = _case(seed=2)
    mod = SimpleNamespace(layer_idx=0)
    fused = C.cascade_attention(mod, q, k, v, None, cascade_step=_step(mask, prefixes, groups))[0]
    monkeypatch.setattr(C, "_FLASH_CPU", None)
    plain = C.cascade_attention(mod, q, k, v, None, cascade_step=_step(mask, prefixes, groups))[0]
    assert torch.allclose(fused, plain, atol=1e-5)


def test_refuses_what_it_does_not_implement():
    q, k, v, mask, prefixes, groups = _case()
    mod = SimpleNamespace(layer_idx=0)
    with pytest.raises(RuntimeError, match="step context"):
        C.cascade_attention(mod, q, k, v, None)
    with pytest.raises(RuntimeError, match="soft-capping"):
        C.cascade_attention(mod, q, k, v, None, cascade_step=_step(mask, prefixes, groups), softcap=30.0)
    with pytest.raises(RuntimeError, match="one-token"):
        C.cascade_attention(mod, q.expand(5, 9, 2, 16), k, v, None, cascade_step=_step(mask, prefixes, groups))
