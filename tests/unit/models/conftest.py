"""Shared fixtures of the model unit tests."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch


class SmolLM2Shape:
    """SmolLM2-135M's dims only (30 layers, hidden 576, 9 query / 3 kv heads of 64, MLP 1,536,
    vocabulary 49,152) and one float32 parameter: what models/memory.py reads of a model, so the
    memory rule can be worked out by hand without loading weights."""

    def __init__(self):
        self.config = SimpleNamespace(num_hidden_layers=30, hidden_size=576, num_attention_heads=9,
                                      num_key_value_heads=3, head_dim=64, intermediate_size=1536,
                                      vocab_size=49152, _attn_implementation="sdpa")
        self._p = torch.zeros(1, dtype=torch.float32)

    def parameters(self):
        yield self._p


@pytest.fixture
def smollm2_shape() -> SmolLM2Shape:
    return SmolLM2Shape()
