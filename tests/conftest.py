"""Shared fixtures. The embedded model is real (SmolLM2-135M) and loaded once per session.

TAMPERBENCH_HOME defaults to a cache under the repository's ignored ``.tb_home`` so tests never
touch the user's ~/.cache and the dequantized weights are built once per checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("TAMPERBENCH_HOME", str(REPO / ".tb_home"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def embedded_backend():
    from tamperbench.models import load_backend

    return load_backend("embedded", device="cpu")


@pytest.fixture(scope="session")
def embedded_tokenizer(embedded_backend):
    return embedded_backend.tokenizer
