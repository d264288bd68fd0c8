"""The SAE trainer's arithmetic on synthetic data (no model): deterministic by seed, learns."""

from __future__ import annotations

import torch

from tamperbench.owmi.controls.sae_train import SaeTrainSpec, cfg_json, train


def test_training_is_deterministic_by_seed_and_reduces_the_error():
    x = torch.randn(400, 16, generator=torch.Generator().manual_seed(3)) * 2 + 1
    spec = SaeTrainSpec(features=24, texts=16, steps=40, batch_size=64, l1=0.1)
    a, rec = train(x, spec)
    b, _ = train(x, spec)
    c, _ = train(x, spec.model_copy(update={"seed": 1}))
    assert all(torch.equal(a[k], b[k]) for k in a) and not torch.equal(a["W_dec"], c["W_dec"])
    assert a["W_enc"].shape == (16, 24) and a["W_dec"].shape == (24, 16) and a["b_enc"].shape == (24,)
    assert rec["relative_mse"] < rec["relative_mse_first"]


def test_cfg_names_the_site_in_transformer_lens_terms():
    cfg = cfg_json(SaeTrainSpec(layer=7, site="resid_pre", features=64), 576)
    assert cfg["metadata"]["hook_name"] == "blocks.7.hook_resid_pre" and cfg["d_sae"] == 64 and cfg["d_in"] == 576
