"""The cached patch plan of ``PackedLinears.active()`` (models/decoding/packed_linear.py).

Why: the plan (which linear gets which packed forward) used to be rebuilt on every forward, about
1.7 ms each; it is now reused while nothing it depends on changed. These checks change each of
those things between two blocks and expect the same behaviour as a fresh plan: someone else's
forward installed (left alone, and still in place afterwards) or removed again (packed again), a
weight or bias replaced by a new parameter or re-cast (re-packed / left to its own forward).
Expected values come from ``torch.nn.functional.linear``, not from the code under test. No model.
"""

from __future__ import annotations

import pytest
import torch

from tamperbench.models.decoding.packed_linear import PackedLinears

pytestmark = pytest.mark.skipif(not (torch.backends.mkldnn.is_available()
                                     and hasattr(torch.ops.mkldnn, "_linear_pointwise")),
                                reason="needs oneDNN packed linears (CPU build)")


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.Linear(96, 40))


def _plain(net, x):
    return torch.nn.functional.linear(torch.nn.functional.linear(x, net[0].weight, net[0].bias),
                                      net[1].weight, net[1].bias)


def _run(packer, net, x):
    with torch.inference_mode(), packer.active():
        return net(x), {i: m.__dict__.get("forward") for i, m in enumerate(net)}


def test_plan_is_reused_while_nothing_changed(monkeypatch):
    net, x = _net(), torch.randn(3, 64)
    packer = PackedLinears(net)
    builds = []
    real = packer._build_plan
    monkeypatch.setattr(packer, "_build_plan", lambda: builds.append(1) or real())
    first, fwd1 = _run(packer, net, x)
    second, fwd2 = _run(packer, net, x)
    assert len(builds) == 1  # built once, reused
    assert fwd1 == fwd2 and all(f is not None for f in fwd1.values())  # the same packed forwards
    assert torch.equal(first, second)
    assert all("forward" not in m.__dict__ for m in net)
    torch.testing.assert_close(first, _plain(net, x), rtol=1e-5, atol=1e-5)


def test_someone_elses_forward_installed_after_the_plan_is_left_alone():
    net, x = _net(), torch.randn(3, 64)
    packer = PackedLinears(net)
    _run(packer, net, x)  # the plan exists and packs both layers
    calls = []
    original = net[1].forward

    def theirs(h):  # e.g. accelerate's offload hook: an instance forward around the class one
        calls.append(h.shape)
        return original(h)

    net[1].forward = theirs
    got, fwd = _run(packer, net, x)
    assert fwd[1] is theirs and calls == [torch.Size([3, 96])]  # theirs ran, not a packed product
    assert fwd[0] is not None and fwd[0] is not theirs  # the other layer is still packed
    assert net[1].__dict__["forward"] is theirs  # and theirs is still installed after the block
    torch.testing.assert_close(got, _plain(net, x), rtol=1e-5, atol=1e-5)
    del net[1].forward  # removed again: packed again
    calls.clear()
    _, fwd = _run(packer, net, x)
    assert fwd[1] is not None and fwd[1] is not theirs and calls == []
    assert "forward" not in net[1].__dict__


def test_replaced_or_recast_parameters_are_followed():
    net, x = _net(), torch.randn(3, 64)
    packer = PackedLinears(net)
    before, _ = _run(packer, net, x)
    with torch.no_grad():
        net[1].weight = torch.nn.Parameter(-3.0 * net[1].weight)  # a new tensor object (a LoRA swap)
        net[0].bias = torch.nn.Parameter(net[0].bias + 1.0)
    got, _ = _run(packer, net, x)
    want = _plain(net, x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, before, atol=1e-3)
    for m in net:  # re-cast through .data: the same parameter objects, new storage
        m.weight.data, m.bias.data = m.weight.data.double(), m.bias.data.double()
    got, fwd = _run(packer, net, x.double())
    assert fwd == {0: None, 1: None}  # float64 now: left to nn.Linear's own forward
    assert torch.equal(got, _plain(net, x.double()))


class _Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = torch.nn.Linear(16, 8), torch.nn.Linear(16, 4), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)


def test_fused_group_follows_a_bias_changed_in_place_or_through_data():
    torch.manual_seed(2)
    m, x = _Attn(), torch.randn(5, 16)
    packer = PackedLinears(m)
    assert [len(g.members) for g in packer.groups] == [3]

    def outs():
        with torch.inference_mode(), packer.active():
            return m(x)

    outs()
    assert packer.groups[0].fused
    with torch.no_grad():
        m.k_proj.bias.add_(5.0)  # in place: the concatenated bias of the fused product must follow
    got = outs()
    with torch.no_grad():
        torch.testing.assert_close(got[1], torch.nn.functional.linear(x, m.k_proj.weight, m.k_proj.bias))
        m.v_proj.bias.data = m.v_proj.bias.data - 7.0  # new storage behind the same parameter
    got = outs()
    with torch.no_grad():
        torch.testing.assert_close(got[2], torch.nn.functional.linear(x, m.v_proj.weight, m.v_proj.bias))
        torch.testing.assert_close(got[1], torch.nn.functional.linear(x, m.k_proj.weight, m.k_proj.bias))
