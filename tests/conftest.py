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


# Property tests draw the same examples on every run (CI included): a red build must reproduce.
# Explore new examples by hand with TB_HYPOTHESIS_EXPLORE=1 (a failure prints its seed).
try:
    from hypothesis import settings as _hyp_settings

    _hyp_settings.register_profile("tamperbench", derandomize=not os.environ.get("TB_HYPOTHESIS_EXPLORE"))
    _hyp_settings.load_profile("tamperbench")
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    pass


@pytest.fixture(scope="session")
def embedded_backend():
    from tamperbench.models import load_backend

    return load_backend("embedded", device="cpu")


@pytest.fixture(scope="session")
def embedded_tokenizer(embedded_backend):
    return embedded_backend.tokenizer


MODEL_FIXTURES = {"embedded_backend", "embedded_tokenizer"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A test that takes the model fixture loads the model: it carries ``model`` even if its author
    forgot the mark, so ``-m "not model"`` (the fast suite) never loads it. (A test that loads the
    model another way, e.g. through a CLI subprocess, still needs the mark by hand.)"""
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("model") is None:
            item.add_marker(pytest.mark.model)


def pytest_collection_finish(session):
    """Build the embedded model's dequantized cache once, before any test runs, when a selected test
    needs the model. WHY: the first load prints a "dequantizing ..." line and takes ~30 s; left to
    whichever test loads first, that line lands in one test's stderr and its one-line-error check
    depends on test order (CI failed that way). A cold cache is tested on purpose, in its own
    TAMPERBENCH_HOME (tests/e2e/foundation/test_hostile_inputs.py)."""
    if any(item.get_closest_marker("model") for item in session.items):
        from tamperbench.models.sources import resolve

        resolve("embedded")
