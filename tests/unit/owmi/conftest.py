"""Tiny randomly initialised llama / qwen2 models built from a config (no download), shared by the
OWMI object/operator tests."""

from __future__ import annotations

import pytest
from owmi_helpers import tiny_model


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny(request):
    return tiny_model(request.param)
