"""Objects and operators on the real embedded model (llama, 9 query heads sharing 3 KV heads):
each pair changes exactly the declared object at the declared positions (ground truth computed
by hand from an unhooked capture)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from tamperbench.models.hooks import hooks
from tamperbench.owmi.engine.objects import ObjectSpec, resolve
from tamperbench.owmi.engine.operators import Intervention

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "unit" / "owmi"))
from owmi_helpers import write_sae  # noqa: E402

pytestmark = pytest.mark.model
POS = [3, 5]


def _cap(model, ids, sites, extra=()):
    got = {}

    def keep(s):
        def fn(a):
            got[s] = a.detach().clone()
        return fn

    with torch.no_grad(), hooks(model, [*extra, *[(s, keep(s)) for s in sites]]):
        model(input_ids=ids)
    return got


@pytest.mark.parametrize("kind, op, dose", [("resid_post", "scale", 0.5), ("attn_out", "zero", 1.0),
                                            ("mlp_out", "noise", 0.3), ("head", "add", 5.0),
                                            ("resid_pre", "replace", 1.0), ("sae_feature", "add", 3.0)])
def test_embedded_pair_changes_exactly_the_object(embedded_backend, tmp_path, kind, op, dose):
    model = embedded_backend.model
    ids = torch.tensor([embedded_backend.tokenizer("The capital of France is Paris.")["input_ids"]])
    extra = {"head": 7} if kind == "head" else {}
    if kind == "sae_feature":
        w = write_sae(tmp_path / "sae", d_in=576, d_sae=64)
        extra = dict(sae_path=str(tmp_path / "sae"), feature=9)
    target = resolve(model, ObjectSpec(kind=kind, layer=6, **extra))
    g = torch.Generator().manual_seed(0)
    direction = torch.nn.functional.normalize(torch.randn(target.dim, generator=g), dim=0)
    reference = torch.randn(target.dim, generator=g)
    iv = Intervention(target, op, dose, positions=POS, direction=direction, reference=reference, seed=3)
    sites = [target.site, "resid_post.5", "resid_post.7"]
    base, got = _cap(model, ids, sites), _cap(model, ids, sites, iv.hook_pairs())
    x, y = base[target.site], got[target.site]
    rest = [p for p in range(ids.shape[1]) if p not in POS]
    assert torch.equal(y[:, rest], x[:, rest])
    assert torch.equal(got["resid_post.5"], base["resid_post.5"]), "upstream layer untouched"
    assert not torch.allclose(got["resid_post.7"], base["resid_post.7"]), "downstream changed"
    if kind == "head":
        assert y.shape[2] == 9, "o_proj input viewed per query head (9), not per KV head (3)"
        others = [h for h in range(9) if h != 7]
        assert torch.equal(y[:, :, others], x[:, :, others])
        assert torch.allclose(y[:, POS, 7], x[:, POS, 7] + dose * direction, atol=1e-4)
    elif kind == "sae_feature":
        f = torch.relu((x[:, POS] - w["b_dec"]) @ w["W_enc"] + w["b_enc"])[..., 9:10]
        assert torch.allclose(y[:, POS], x[:, POS] + dose * direction[0] * w["W_dec"][9], atol=1e-3)
        assert f.shape[-1] == 1
    elif op == "scale":
        assert torch.allclose(y[:, POS], dose * x[:, POS], atol=1e-4)
    elif op == "zero":
        assert torch.count_nonzero(y[:, POS]) == 0
    elif op == "replace":
        assert torch.allclose(y[:, POS], reference.expand_as(y[:, POS]), atol=1e-4)
    else:  # noise: recompute the seeded draw by hand
        eps = torch.stack([torch.randn(x.shape[-1], generator=torch.Generator().manual_seed(3 * 1000003 + p))
                           for p in POS])  # one draw per absolute position, seeded seed * 1000003 + position
        rms = x[:, POS].pow(2).mean(-1, keepdim=True).sqrt()
        assert torch.allclose(y[:, POS], x[:, POS] + dose * rms * eps, atol=1e-3)
