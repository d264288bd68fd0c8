"""Helpers for the OWMI tests: tiny random models from a config and an SAE on disk."""

from __future__ import annotations

import json

import torch


def tiny_model(arch: str):
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    torch.manual_seed(0)
    common = dict(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, eos_token_id=1, pad_token_id=0,
                  bos_token_id=2)  # grouped-query attention: 4 query heads share 2 KV heads
    cfg = LlamaConfig(**common) if arch == "llama" else Qwen2Config(**common)
    return AutoModelForCausalLM.from_config(cfg).float().eval()


def write_sae(folder, d_in: int, d_sae: int, seed: int = 0, architecture: str = "standard"):
    """A small SAE in SAELens's disk format: cfg.json + sae_weights.safetensors."""
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    w = {"W_enc": torch.randn(d_in, d_sae, generator=g) * 0.3, "W_dec": torch.randn(d_sae, d_in, generator=g) * 0.3,
         "b_enc": torch.full((d_sae,), 0.05), "b_dec": torch.zeros(d_in)}
    if architecture == "jumprelu":
        w["threshold"] = torch.full((d_sae,), 0.01)
    save_file(w, str(folder / "sae_weights.safetensors"))
    (folder / "cfg.json").write_text(json.dumps(sae_cfg(d_in, d_sae, architecture)))
    return w


def sae_cfg(d_in: int, d_sae: int, architecture: str = "standard", layer: int = 1) -> dict:
    """``cfg.json`` as sae-lens 6's ``save_model`` writes it (the loader reads it through sae-lens when installed)."""
    return {"d_in": d_in, "d_sae": d_sae, "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": True,
            "normalize_activations": "none", "reshape_activations": "none",
            "metadata": {"hook_name": f"blocks.{layer}.hook_resid_post", "hook_layer": layer,
                         "sae_lens_version": "6.54.12", "sae_lens_training_version": "6.54.12"},
            "architecture": architecture}
