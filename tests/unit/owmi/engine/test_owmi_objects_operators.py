"""Every object x operator pair changes exactly the declared object at the declared positions.

Ground truth is computed here by hand from an unhooked capture (the operator formulas written
out again, the SAE encoded by hand from the saved weights), not by the code under test. Runs on
tiny random llama and qwen2 models with grouped-query attention (4 query / 2 KV heads).
"""

from __future__ import annotations

import pytest
import torch

from tamperbench.errors import UserError
from tamperbench.models.hooks import hooks
from tamperbench.owmi.engine.objects import ObjectSpec, resolve
from tamperbench.owmi.engine.operators import OPERATORS, Intervention

from owmi_helpers import write_sae

LAYER, POS, SEQ = 1, (2, 4), 7
SITES = [f"{s}.{L}" for L in range(3) for s in ("resid_pre", "resid_post", "attn_out", "mlp_out", "head_out")]
DOSE = {"zero": 1.0, "scale": 3.0, "noise": 0.7, "replace": 0.6, "add": 2.5}


def _capture(model, ids, extra=()):
    got = {}

    def keep(site):
        def fn(act):
            got[site] = act.detach().clone()
        return fn

    with torch.no_grad(), hooks(model, [*extra, *[(s, keep(s)) for s in SITES]]):
        model(input_ids=ids)
    return got


def _expected(op, dose, x, direction, reference, seed):
    if op == "zero":
        return (1 - dose) * x
    if op == "scale":
        return dose * x
    if op == "noise":  # one draw per absolute position p, seeded seed * 1000003 + p (the same for every row)
        eps = torch.stack([torch.randn(x.shape[-1], generator=torch.Generator().manual_seed(seed * 1000003 + p))
                           for p in POS])
        return x + dose * x.pow(2).mean(-1, keepdim=True).sqrt() * eps
    if op == "replace":
        return (1 - dose) * x + dose * reference
    return x + dose * direction


@pytest.mark.parametrize("op", OPERATORS)
@pytest.mark.parametrize("kind", ["resid_pre", "resid_post", "attn_out", "mlp_out", "head", "sae_feature"])
def test_pair_changes_exactly_the_declared_object(tiny, tmp_path, kind, op):
    model = tiny
    ids = torch.arange(3, 3 + SEQ)[None]
    extra = {}
    if kind == "head":
        extra["head"] = 3  # a query head in the second KV group
    if kind == "sae_feature":
        weights = write_sae(tmp_path / "sae", d_in=32, d_sae=16)
        extra.update(sae_path=str(tmp_path / "sae"), feature=5)
    target = resolve(model, ObjectSpec(kind=kind, layer=LAYER, **extra))
    g = torch.Generator().manual_seed(1)
    direction = torch.nn.functional.normalize(torch.randn(target.dim, generator=g), dim=0)
    reference = torch.randn(target.dim, generator=g)
    iv = Intervention(target, op, DOSE[op], positions=POS, direction=direction, reference=reference, seed=11)
    base = _capture(model, ids)
    got = _capture(model, ids, iv.hook_pairs())
    site = target.site
    cols = list(POS)
    x = base[site]
    want = x.clone()
    if kind == "head":
        want[:, cols, 3] = _expected(op, DOSE[op], x[:, cols, 3], direction, reference, 11)
        others = [h for h in range(4) if h != 3]
        assert torch.equal(got[site][:, :, others], x[:, :, others]), "other heads must be untouched"
    elif kind == "sae_feature":
        f = torch.relu((x[:, cols] - weights["b_dec"]) @ weights["W_enc"] + weights["b_enc"])[..., 5:6]
        f_new = _expected(op, DOSE[op], f, direction, reference, 11)
        want[:, cols] = x[:, cols] + (f_new - f) * weights["W_dec"][5]
    else:
        want[:, cols] = _expected(op, DOSE[op], x[:, cols], direction, reference, 11)
    assert torch.allclose(got[site], want, atol=1e-5), "declared object/positions must hold the operator's value"
    rest = [p for p in range(SEQ) if p not in cols]
    assert torch.equal(got[site][:, rest], x[:, rest]), "undeclared positions at the site must be bit-identical"
    assert not torch.allclose(got[site][:, cols], x[:, cols]), "the operator must actually change the object"
    assert sorted(iv.altered) == cols
    # nothing upstream of the hooked module changes; later layers change only from the first declared position on
    order = SITES.index(site)
    upstream = [s for s in SITES if int(s.rsplit(".", 1)[1]) < LAYER]
    if site.startswith("resid_post") or site.startswith("mlp_out"):
        upstream += [f"resid_pre.{LAYER}", f"attn_out.{LAYER}", f"head_out.{LAYER}"]
    for s in upstream:
        assert torch.equal(got[s], base[s]), f"{s} is upstream of {site} and must not change"
    for s in SITES[order + 1:]:
        if int(s.rsplit(".", 1)[1]) > LAYER:
            assert torch.allclose(got[s][:, : POS[0]], base[s][:, : POS[0]], atol=1e-6), f"{s}: causal prefix changed"
    assert not torch.allclose(got["resid_post.2"], base["resid_post.2"]), "the change must propagate downstream"


def test_sham_identity_changes_nothing(tiny):
    target = resolve(tiny, ObjectSpec(kind="resid_post", layer=1))
    ids = torch.arange(3, 10)[None]
    iv = Intervention(target, "add", 0.0, identity=True, direction=torch.ones(32))
    base, got = _capture(tiny, ids), _capture(tiny, ids, iv.hook_pairs())
    assert all(torch.equal(base[s], got[s]) for s in SITES)
    assert iv.calls == 1


def test_noise_is_seeded(tiny):
    target = resolve(tiny, ObjectSpec(kind="resid_pre", layer=2))
    ids = torch.arange(3, 10)[None]
    runs = [_capture(tiny, ids, Intervention(target, "noise", 0.5, seed=s).hook_pairs())["resid_post.2"] for s in (4, 4, 5)]
    assert torch.equal(runs[0], runs[1]) and not torch.allclose(runs[0], runs[2])


def test_noise_depends_on_position_not_on_call_order(tiny):
    """The same position gets the same noise whether the prompt arrives in one forward or token by
    token (a stream drawn in call order would not): what lets the batched engine, which runs
    different forwards than the one-at-a-time engine, alter every position identically."""
    target = resolve(tiny, ObjectSpec(kind="resid_post", layer=1))
    ids = list(range(3, 10))
    whole = Intervention(target, "noise", 0.5, seed=4)
    with torch.no_grad(), hooks(tiny, whole.hook_pairs()):
        one = tiny(input_ids=torch.tensor([ids])).logits[0, -1]
    step = Intervention(target, "noise", 0.5, seed=4)
    from transformers import DynamicCache

    from tamperbench.owmi.engine.forward import _cache_kw

    cache = DynamicCache()
    with torch.no_grad(), hooks(tiny, step.hook_pairs()):
        for p, t in enumerate(ids):
            step.offset = p
            last = tiny(input_ids=torch.tensor([[t]]), use_cache=True, **{_cache_kw(tiny): cache}).logits[0, -1]
    assert torch.allclose(one, last, atol=1e-4)
    assert whole.altered == step.altered == list(range(7))


def test_hooks_removed_when_forward_raises(tiny):
    target = resolve(tiny, ObjectSpec(kind="head", layer=0, head=1))
    iv = Intervention(target, "scale", 2.0)

    def boom(act):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        with hooks(tiny, [*iv.hook_pairs(), ("mlp_out.2", boom)]):
            tiny(input_ids=torch.arange(3, 8)[None])
    left = [m for m in tiny.modules() if m._forward_hooks or m._forward_pre_hooks]
    assert left == [], "every hook must be removed after an exception"


@pytest.mark.parametrize("spec, field", [
    (dict(kind="resid_post", layer=3), "object.layer"),
    (dict(kind="resid_post", layer=-1), "object.layer"),
    (dict(kind="head", layer=0, head=4), "object.head"),  # 4 query heads: 0..3 (GQA: not the 2 KV heads)
    (dict(kind="head", layer=0), "object.head"),
    (dict(kind="sae_feature", layer=0), "object.sae_path"),
    (dict(kind="mlp_out", layer=0, head=1), "object.head"),
])
def test_bad_objects_refused_with_field(tiny, spec, field):
    with pytest.raises(UserError, match=field.replace(".", r"\.")):
        resolve(tiny, ObjectSpec(**spec))


def test_sae_width_mismatch_and_feature_range(tiny, tmp_path):
    write_sae(tmp_path / "wide", d_in=48, d_sae=8)
    with pytest.raises(UserError, match=r"object\.sae_path: SAE width d_in=48"):
        resolve(tiny, ObjectSpec(kind="sae_feature", layer=1, sae_path=str(tmp_path / "wide"), feature=0))
    write_sae(tmp_path / "ok", d_in=32, d_sae=8)
    with pytest.raises(UserError, match=r"object\.feature"):
        resolve(tiny, ObjectSpec(kind="sae_feature", layer=1, sae_path=str(tmp_path / "ok"), feature=8))
    with pytest.raises(UserError, match=r"object\.sae_path: .*no SAELens weights"):
        resolve(tiny, ObjectSpec(kind="sae_feature", layer=1, sae_path=str(tmp_path / "missing"), feature=0))


def test_jumprelu_sae_loads(tiny, tmp_path):
    write_sae(tmp_path / "j", d_in=32, d_sae=8, architecture="jumprelu")
    t = resolve(tiny, ObjectSpec(kind="sae_feature", layer=1, sae_path=str(tmp_path / "j"), feature=2))
    assert t.dim == 1 and t.sae.architecture == "jumprelu"


def test_unsupported_architecture(tiny):
    class Fake:
        class config:
            model_type = "gpt2"
            num_hidden_layers = 2
    with pytest.raises(UserError, match="object: architecture 'gpt2' is not supported"):
        resolve(Fake(), ObjectSpec(kind="resid_post", layer=0))


@pytest.mark.parametrize("op, dose", [("zero", 1.5), ("scale", -1.0), ("noise", -0.1), ("replace", 2.0),
                                      ("add", float("nan")), ("squash", 1.0)])
def test_dose_outside_domain(op, dose):
    from tamperbench.owmi.engine.operators import check_dose

    with pytest.raises(UserError, match="dose|operator"):
        check_dose(op, dose)
