"""The decoder's oneDNN pre-packed linears (models/decoding/packed_linear.py).

Expected values come from ``torch.nn.functional.linear`` (MKL's sgemm, the path the packed op
replaces), not from the code under test. No model load: small float32 layers suffice.
"""

from __future__ import annotations

import pytest
import torch

from tamperbench.models.decoding import packed_linear
from tamperbench.models.decoding.packed_linear import PackedLinears, packed_linears_for

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="needs oneDNN (CPU build)")


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.Linear(96, 40, bias=False))


def _plain(net, x):
    h = torch.nn.functional.linear(x, net[0].weight, net[0].bias)
    return torch.nn.functional.linear(h, net[1].weight)


def test_packed_forward_matches_aten_and_is_scoped():
    net = _net()
    packer = PackedLinears(net)
    x = torch.randn(5, 3, 64)
    with torch.inference_mode():
        want = _plain(net, x)
        with packer.active():
            assert all("forward" in m.__dict__ for m in net)  # routed through the packed op
            got = net(x)
        after = net(x)
    assert all("forward" not in m.__dict__ for m in net)  # restored: the class forward again
    assert got.shape == want.shape
    assert not torch.equal(got, torch.zeros_like(got))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(after, want)  # outside the context the model is untouched, bit for bit


def test_in_place_weight_change_is_repacked():
    net = _net()
    packer = PackedLinears(net)
    x = torch.randn(4, 64)
    with torch.inference_mode():
        with packer.active():
            before = net(x)
        net[1].weight.mul_(-2.0)  # as training or a LoRA merge would: same storage, new version
        with packer.active():
            got = net(x)
        want = _plain(net, x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, -2.0 * before, rtol=1e-5, atol=1e-5)


def test_forward_hooks_still_fire_and_can_edit_outputs():
    net = _net()
    packer = PackedLinears(net)
    seen = []
    net[0].register_forward_hook(lambda mod, inp, out: seen.append(out.shape) or out * 0.0)
    x = torch.randn(2, 64)
    with torch.inference_mode(), packer.active():
        got = net(x)
    assert seen == [torch.Size([2, 96])]
    # the hook zeroed layer 0's output, so layer 1 (no bias) returns zeros
    assert torch.equal(got, torch.zeros(2, 40))


def test_left_alone_with_gradients_and_with_someone_elses_forward():
    net = _net()
    packer = PackedLinears(net)
    with packer.active():  # gradients on: the packed op has no backward
        assert all("forward" not in m.__dict__ for m in net)
        net(torch.randn(2, 64)).sum().backward()
    assert net[0].weight.grad is not None
    other = net[1].forward
    net[1].forward = other  # e.g. accelerate's offload hook wraps forward per instance
    with torch.inference_mode(), packer.active():
        assert "forward" in net[0].__dict__
        assert net[1].__dict__["forward"] is other
    assert "forward" not in net[0].__dict__ and net[1].__dict__["forward"] is other


def test_switch_and_eligibility(monkeypatch):
    net = _net()
    monkeypatch.setattr(packed_linear, "_PACKERS", packed_linear.weakref.WeakKeyDictionary())
    monkeypatch.setenv("TAMPERBENCH_PACKED_LINEAR", "0")
    assert packed_linears_for(net) is None
    monkeypatch.delenv("TAMPERBENCH_PACKED_LINEAR")
    first = packed_linears_for(net)
    assert first is not None and packed_linears_for(net) is first  # one packer per model
    net.to(torch.float64)  # cast after packing: those layers are left to their own forward
    x = torch.randn(3, 64, dtype=torch.float64)
    with torch.inference_mode(), first.active():
        assert all("forward" not in m.__dict__ for m in net)
        assert torch.equal(net(x), _plain(net, x))
    half = torch.nn.Sequential(torch.nn.Linear(8, 8).to(torch.bfloat16))
    assert packed_linears_for(half) is None  # only float32 weights are packed
