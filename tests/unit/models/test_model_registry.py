"""The model-spec scheme registry: dispatch, missing extras, reserved schemes (pure, no model)."""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.models import load_backend, register_backend
from tamperbench.models import registry


def test_schemes_of_specs(tmp_path):
    (tmp_path / "m").mkdir()
    assert registry.scheme_of("embedded") == "embedded"
    assert registry.scheme_of("SmolLM2-135M-Instruct") == "embedded"
    assert registry.scheme_of(str(tmp_path / "m")) == "dir"
    assert registry.scheme_of(str(tmp_path / "x.gguf")) == "gguf"
    assert registry.scheme_of("org/name") == "hub"
    assert registry.scheme_of("vllm:org/name") == "vllm"
    assert registry.scheme_of("openai:http://127.0.0.1:8000/v1#m") == "openai"


def test_a_reserved_scheme_is_refused_until_registered(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", {k: v for k, v in registry._REGISTRY.items() if k != "openai"})
    monkeypatch.setattr(registry, "_RESERVED", {"openai": "the HTTP backend is not built yet"})
    assert registry.scheme_of("openai:http://x#m") == "openai"
    with pytest.raises(UserError, match=r"^model 'openai:http://x#m': the HTTP backend is not built yet$"):
        load_backend("openai:http://x#m")


def test_missing_extra_is_one_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    with pytest.raises(UserError) as err:
        load_backend("vllm:org/name")
    assert str(err.value) == "model 'vllm:org/name': needs the vllm extra: pip install 'tamperbench[vllm]'"


def test_registering_a_scheme_is_one_call(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_RESERVED", dict(registry._RESERVED))
    register_backend("toy", "test_model_registry:ToyBackend")
    be = load_backend("toy:hello", device="cpu", chat_template="none")
    assert isinstance(be, ToyBackend) and be.spec == "toy:hello" and be.kw["chat_template"] == "none"


def test_registered_module_not_built_is_one_line(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    register_backend("ghost", "tamperbench.models.no_such_backend:Ghost")
    with pytest.raises(UserError, match=r"^model 'ghost:x': the 'ghost' backend 'tamperbench.models.no_such_backend:Ghost': "
                                        r"module 'tamperbench.models.no_such_backend' not found$"):
        load_backend("ghost:x")


class ToyBackend:
    def __init__(self, spec, kw):
        self.spec, self.kw = spec, kw

    @classmethod
    def from_spec(cls, spec, **kw):
        return cls(spec, kw)
