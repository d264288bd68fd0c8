"""OWMI refuses a remote model among the hooked ``models`` from the spec alone (owmi/run/runner.py).

Why: OWMI alters the weights' computation with forward hooks, which neither ``openai:`` nor
``vllm:`` backends offer. The capability check at load refuses them too, but only when their turn
comes, after every model listed before them has run; the preflight refuses before any compute.
An observer reads text only, so remote schemes stay allowed in ``observer_models``, and a scheme
a plugin registers is left to its own capability check at load (it may offer hooks).
"""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.models import registry
from tamperbench.owmi.run.spec import parse_spec
from tamperbench.owmi.run.runner import preflight

OBJ = {"objects": [{"kind": "resid_post", "layer": 3}], "operators": [{"name": "scale", "dose": 0.5}]}


@pytest.mark.parametrize("models, field, scheme", [
    (["openai:gpt-4o-mini"], "models[0] (openai:gpt-4o-mini)", "openai"),
    (["vllm:org/name", "embedded"], "models[0] (vllm:org/name)", "vllm"),
])
def test_remote_hooked_model_refused_in_one_line(models, field, scheme):
    with pytest.raises(UserError) as err:
        preflight(parse_spec({**OBJ, "models": models}))
    msg = str(err.value)
    assert msg == (f"{field}: OWMI alters the model's internals and needs hooks and activation capture, which a "
                   f"'{scheme}' backend does not offer; use a local model (embedded, a directory, a .gguf file or "
                   f"org/name), or list it under observer_models (text only)")
    assert "\n" not in msg


def test_remote_observer_and_plugin_scheme_pass_the_preflight(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_backend("toy", "test_model_registry:ToyBackend")
    # a plugin scheme is not refused from its name (its capability check runs at load), and a
    # remote observer is text only: neither reaches a config read nor a refusal
    preflight(parse_spec({**OBJ, "models": ["toy:hello"], "observer_models": ["openai:gpt-4o-mini"]}))
