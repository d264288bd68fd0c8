"""Model spec scheme -> backend, imported lazily.

Why a registry: the suites ask for "a backend for this spec" and must not know whether it is a
transformers model in this process, an OpenAI-compatible server or a vLLM engine. Each scheme
names its backend by import string, so ``tamperbench --help`` and a run on the embedded model
never import vllm or openai, and a user without an extra gets one line saying which one to install.

Schemes: ``embedded`` (also ``smollm2-135m-instruct``), ``dir`` (a local transformers directory),
``gguf`` (a local .gguf file), ``hub`` (``org/name``) -- each optionally followed by ``+peft:ADAPTER_DIR``
(a peft adapter applied on top, ``models/adapter.py``) -- and prefix schemes written ``name:rest``
(``openai:``, ``vllm:``). Registering a new prefix scheme is one call::

    register_backend("openai", "tamperbench.models.openai_compat:OpenAIBackend", extra="openai")

The target is a class with a ``from_spec(spec, *, device, dtype, batch_size, chat_template)``
classmethod, or a plain function with that signature.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tamperbench.errors import UserError
from tamperbench.registry import load_object

__all__ = ["BackendEntry", "load_backend", "register_backend", "registered", "scheme_of", "shared_backends"]

LOCAL_SCHEMES = ("embedded", "dir", "gguf", "hub")


@dataclass(frozen=True)
class BackendEntry:
    scheme: str
    target: str  # "package.module:Attribute"
    extra: str | None = None  # pip extra that provides the dependencies
    requires: tuple[str, ...] = ()  # importable modules the extra installs


_REGISTRY: dict[str, BackendEntry] = {}
# prefix schemes reserved without a backend: a spec naming one is refused with this message instead
# of being read as a hub id. Registering the scheme lifts the reservation. Every shipped prefix
# scheme (openai, vllm) has its backend, so none is reserved here.
_RESERVED: dict[str, str] = {}


def register_backend(scheme: str, target: str, *, extra: str | None = None,
                     requires: tuple[str, ...] | None = None) -> None:
    """Map ``scheme`` to a backend import string; later registrations replace earlier ones."""
    if ":" not in target:
        raise ValueError(f"backend target '{target}' must be 'module:Attribute'")
    reqs = tuple(requires) if requires is not None else ((extra,) if extra else ())
    _REGISTRY[scheme] = BackendEntry(scheme, target, extra, reqs)
    _RESERVED.pop(scheme, None)


def registered() -> dict[str, BackendEntry]:
    return dict(_REGISTRY)


def scheme_of(spec: str) -> str:
    """The scheme a spec string belongs to (without loading anything); ``BASE+peft:DIR`` is its base's."""
    from tamperbench.models.adapter import MARK
    from tamperbench.models.sources import EMBEDDED_ALIASES

    s = spec.strip().partition(MARK)[0].strip()
    head, sep, _ = s.partition(":")
    if sep and (head in _REGISTRY or head in _RESERVED) and head not in LOCAL_SCHEMES:
        return head
    if s.lower() in EMBEDDED_ALIASES:
        return "embedded"
    from tamperbench.models.installable import lookup

    if lookup(s) is not None:
        return "gguf"  # an installable model package holding a GGUF (models/installable.py)
    path = Path(s).expanduser()
    if path.is_dir():
        return "dir"
    if path.is_file() or s.endswith(".gguf"):
        return "gguf"
    return "hub"  # sources.resolve gives the precise error for anything else


def _import(entry: BackendEntry, spec: str) -> Any:
    missing = [m for m in entry.requires if importlib.util.find_spec(m) is None]
    if missing:
        extra = entry.extra or missing[0]
        raise UserError(f"model '{spec}': needs the {extra} extra: pip install 'tamperbench[{extra}]'")
    return load_object(entry.target, f"model '{spec}': the '{entry.scheme}' backend")


# Inside ``shared_backends()``: (spec, device, dtype, batch size, chat template) -> the backend loaded for it.
_SHARED: dict[tuple, object] | None = None


@contextmanager
def shared_backends() -> Iterator[None]:
    """Within this block, ``load_backend`` loads a local model once per identical request (spec, resolved
    device, dtype, batch size, chat template) and hands the same backend to every later caller:
    ``tamperbench demo`` runs its CLI commands in one process, and each would otherwise load the model
    (weights, tokenizer, kernels) again. Remote schemes (openai, vllm) and adapter specs (``+peft:``,
    whose folder a retraining rewrites) are never shared. Nested blocks
    share the outer one's backends; leaving the outermost drops them."""
    global _SHARED
    outer = _SHARED
    if outer is None:
        _SHARED = {}
    try:
        yield
    finally:
        if outer is None:
            _SHARED = None


def load_backend(spec: str = "embedded", *, device: str = "auto", dtype: str | None = None,
                 batch_size: int | None = None, chat_template: str | None = None):
    """Load a model spec through its scheme's backend (once per request inside ``shared_backends()``)."""
    from tamperbench.models.adapter import MARK

    if (_SHARED is not None and isinstance(spec, str) and spec.strip() and MARK not in spec
            and scheme_of(spec) in LOCAL_SCHEMES):
        if device == "auto":  # the key names the device it resolves to, as the loader resolves it
            import torch

            device_key = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            device_key = device
        key = (spec.strip(), device_key, dtype, batch_size, chat_template)
        if key not in _SHARED:
            _SHARED[key] = _load(spec, device=device, dtype=dtype, batch_size=batch_size, chat_template=chat_template)
        return _SHARED[key]
    return _load(spec, device=device, dtype=dtype, batch_size=batch_size, chat_template=chat_template)


def _load(spec: str, *, device: str, dtype: str | None, batch_size: int | None, chat_template: str | None):
    if not isinstance(spec, str) or not spec.strip():
        raise UserError("--model: empty model spec")
    scheme = scheme_of(spec)
    from tamperbench.models.adapter import MARK

    if MARK in spec and scheme not in LOCAL_SCHEMES:
        raise UserError(f"model '{spec}': an adapter ('{MARK}') applies to local weights only, not to a "
                        f"'{scheme}' backend")
    if scheme in _RESERVED and scheme not in _REGISTRY:
        raise UserError(f"model '{spec}': {_RESERVED[scheme]}")
    entry = _REGISTRY.get(scheme)
    if entry is None:  # pragma: no cover - every scheme_of result is registered below
        raise UserError(f"model '{spec}': no backend registered for scheme '{scheme}'")
    target = _import(entry, spec)
    factory = getattr(target, "from_spec", target)
    return factory(spec, device=device, dtype=dtype, batch_size=batch_size, chat_template=chat_template)


for _scheme in LOCAL_SCHEMES:
    register_backend(_scheme, "tamperbench.models.loader:load_hf")
register_backend("vllm", "tamperbench.models.vllm_backend:VLLMBackend", extra="vllm")
register_backend("openai", "tamperbench.models.openai_compat:OpenAIBackend", extra="openai")
