"""Shared fixtures of the speed integration tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch


def _tiny_llama(vocab: int) -> torch.nn.Module:
    """A 2-layer random llama built from its config (no download): 4 query / 2 kv heads of 8, seeded,
    with weights large enough (initializer 0.3) that greedy tokens differ from row to row."""
    import transformers as tf
    from transformers import AutoModelForCausalLM

    cfg = tf.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         initializer_range=0.3, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()


@pytest.fixture
def tiny_llama() -> Callable[[int], torch.nn.Module]:
    """Builds the tiny llama for a vocabulary size: ``model = tiny_llama(V)``."""
    return _tiny_llama
