"""Sibling projections fused into one packed product (models/decoding/packed_linear.py) must give
bitwise the values of the separate packed products, so provenance ("onednn-packed") still names
what ran; a sibling given another input (a hook replaced it) must be computed from that input."""

from __future__ import annotations

import pytest
import torch

from tamperbench.models.decoding.packed_linear import PackedLinears, packed_linears_for

needs_onednn = pytest.mark.skipif(not (torch.backends.mkldnn.is_available()
                                       and hasattr(torch.ops.mkldnn, "_linear_pointwise")),
                                  reason="oneDNN packed linears unavailable")


class _Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = torch.nn.Linear(16, 8), torch.nn.Linear(16, 4), torch.nn.Linear(16, 4)

    def forward(self, x, other=None):
        return self.q_proj(x), self.k_proj(x if other is None else other), self.v_proj(x)


@needs_onednn
def test_fused_group_is_bitwise_the_separate_products_and_respects_hooks():
    torch.manual_seed(0)
    m = _Attn()  # built outside inference mode, as a loaded model is
    pk = PackedLinears(m)
    assert [len(g.members) for g in pk.groups] == [3]
    x, other = torch.randn(5, 16), torch.randn(5, 16)

    def outs(*args):
        with torch.inference_mode(), pk.active():
            return m(*args)

    fused = outs(x)
    assert pk.groups[0].fused and pk.groups[0].pending is None  # nothing held after the block
    assert not any("forward" in lin.__dict__ for lin in (m.q_proj, m.k_proj, m.v_proj))
    groups, pk.groups = pk.groups, []
    separate = outs(x)
    sep_other = outs(x, other)
    pk.groups = groups
    assert all(torch.equal(a, b) for a, b in zip(fused, separate))
    # the packed kernel itself, not a copy of torch's: close to F.linear, within float32 rounding
    assert torch.allclose(fused[0], torch.nn.functional.linear(x, m.q_proj.weight, m.q_proj.bias), atol=1e-5)
    # k_proj given another tensor: computed from it, not sliced out of q's product
    assert all(torch.equal(a, b) for a, b in zip(outs(x, other), sep_other))
    h = m.k_proj.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    try:
        hooked = outs(x)
    finally:
        h.remove()
    assert torch.equal(hooked[1], outs(x * 2)[1]) and not torch.equal(hooked[1], fused[1])
    assert torch.equal(hooked[0], fused[0]) and torch.equal(hooked[2], fused[2])


@needs_onednn
def test_weight_changed_in_place_is_repacked():
    torch.manual_seed(1)
    m = _Attn()
    pk = PackedLinears(m)
    x = torch.randn(3, 16)
    with torch.inference_mode(), pk.active():
        before = m(x)[1]
    with torch.no_grad():
        m.k_proj.weight.mul_(2)  # a LoRA merge, a training step
    with torch.inference_mode(), pk.active():
        after = m(x)[1]
    with torch.no_grad():
        ref = torch.nn.functional.linear(x, m.k_proj.weight, m.k_proj.bias)
    assert torch.allclose(after, ref, atol=1e-5) and not torch.allclose(before, after)


@pytest.mark.model
def test_embedded_model_decodes_bitwise_alike_fused_or_not(embedded_backend):
    from tamperbench.models.decoding.decoder import StepDecoder

    be = embedded_backend
    pk = packed_linears_for(be.model)
    if pk is None:
        pytest.skip("packed linears off here")
    assert len(pk.groups) == 2 * be.model.config.num_hidden_layers  # q/k/v and gate/up of every layer
    prompts = [be.chat_ids([{"role": "user", "content": q}]) for q in ("why is the sky blue?", "Name three colors.")]

    def run():
        dec = StepDecoder(be.model, eos_ids=be.eos_ids, capacity=4)
        dec.add_rows(prompts * 2)
        return [(dec.step(), dec.logp.clone())[1] for _ in range(4)]

    fused = run()
    assert all(g.fused for g in pk.groups)
    groups, pk.groups = pk.groups, []
    try:
        separate = run()
    finally:
        pk.groups = groups
    assert all(torch.equal(a, b) for a, b in zip(fused, separate))
