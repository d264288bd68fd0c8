"""Hooks on the real embedded model: sites read the right tensors, edits take effect, and hooks
never outlive their ``with`` block, even when it raises."""

from __future__ import annotations

import pytest
import torch

from tamperbench.errors import UserError
from tamperbench.models.hooks import resolve_site

pytestmark = pytest.mark.model

L = 7


@pytest.fixture(scope="module")
def ids(embedded_backend):
    return embedded_backend.chat_ids([{"role": "user", "content": "what is the capital of France?"}])


def _hooks(model) -> set[int]:
    """Ids of every hook handle on the model (transformers installs some of its own)."""
    return {id(h) for m in model.modules() for d in (m._forward_hooks, m._forward_pre_hooks) for h in d.values()}


@pytest.fixture(autouse=True)
def baseline(embedded_backend):
    with torch.inference_mode():  # let transformers install its own output-capturing hooks first
        embedded_backend.model(input_ids=torch.tensor([[1, 2]]), output_hidden_states=True)
    before = _hooks(embedded_backend.model)
    yield before
    assert _hooks(embedded_backend.model) == before  # ours are gone after every test




def test_capture_sites_are_consistent(embedded_backend, ids):
    be = embedded_backend
    sites = [f"resid_pre.{L}", f"resid_post.{L}", f"block_out.{L}", f"attn_out.{L}", f"mlp_out.{L}", f"head_out.{L}"]
    acts = be.capture(sites, ids)
    with torch.inference_mode():
        hs = be.model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    torch.testing.assert_close(acts[f"resid_post.{L}"], hs[L + 1])
    torch.testing.assert_close(acts[f"resid_pre.{L}"], hs[L])
    assert torch.equal(acts[f"block_out.{L}"], acts[f"resid_post.{L}"])
    # llama block: resid_post = resid_pre + attn_out + mlp_out
    torch.testing.assert_close(acts[f"resid_pre.{L}"] + acts[f"attn_out.{L}"] + acts[f"mlp_out.{L}"],
                               acts[f"resid_post.{L}"], atol=1e-4, rtol=1e-4)
    heads = acts[f"head_out.{L}"]
    assert heads.shape == (1, len(ids), 9, 64)
    o_proj = be.model.model.layers[L].self_attn.o_proj
    with torch.inference_mode():
        torch.testing.assert_close(o_proj(heads.flatten(-2)), acts[f"attn_out.{L}"], atol=1e-5, rtol=1e-5)


def test_edits_apply_inside_and_vanish_after(embedded_backend, ids):
    be = embedded_backend
    x = torch.tensor([ids])
    with torch.inference_mode():
        base = be.model(input_ids=x).logits
        with be.hooks([(f"mlp_out.{L}", lambda a: torch.zeros_like(a))]):
            ablated = be.model(input_ids=x).logits
        def kill_head(a):
            a = a.clone()
            a[:, :, 3] = 0
            return a
        with be.hooks([(f"head_out.{L}", kill_head)]):
            headless = be.model(input_ids=x).logits
        after = be.model(input_ids=x).logits
    assert not torch.allclose(base, ablated, atol=1e-3)
    assert not torch.allclose(base, headless, atol=1e-4)
    assert torch.equal(base, after)


def test_hooks_removed_when_block_raises(embedded_backend, ids, baseline):
    be = embedded_backend
    with pytest.raises(RuntimeError, match="boom"):
        with be.hooks([(f"attn_out.{L}", lambda a: a * 2), (f"resid_pre.{L}", lambda a: None)]):
            assert len(_hooks(be.model) - baseline) == 2
            raise RuntimeError("boom")
    assert _hooks(be.model) == baseline


def test_capturing_during_step_decoding(embedded_backend, ids):
    be = embedded_backend
    with be.capturing([f"resid_post.{L}"]) as got:
        dec = be.step_decoder(capacity=1)
        dec.add_rows([ids])
        dec.step()
        dec.step()
    shapes = [tuple(t.shape) for t in got[f"resid_post.{L}"]]
    assert shapes == [(1, len(ids), 576), (1, 1, 576), (1, 1, 576)]


def test_bad_sites_are_user_errors(embedded_backend):
    with pytest.raises(UserError, match="resid_mid"):
        resolve_site(embedded_backend.model, "resid_mid.3")
    with pytest.raises(UserError, match="out of range"):
        resolve_site(embedded_backend.model, "attn_out.30")
