"""Every check of an OWMI spec, in one place, before any compute, in the run driver's order:
:func:`validate` (configs, no model loaded) -> :func:`check_loaded` (each model once loaded) ->
:func:`context` (its observers loaded and checked, its engine picked); :func:`setup_worker` does the
last two in another process.

The one-line errors themselves are raised where the knowledge lives (``objects.resolve`` for an
object, ``choice.tokenize`` for an option set, the suite's capability check for hooks); this module
is the one place that calls them, so every entry point (``owmi run``, its ``--dry-run``, the
known-positive check) validates the same way, once.

Why from configs: with several models in a spec, an object that does not exist in the *second*
model (a layer or head index out of range, an unsupported architecture, SAE weights whose width
does not match the site) would otherwise surface only after the first model had run for minutes
and written its records. Every check :func:`tamperbench.owmi.engine.objects.resolve` makes reads only the
model's config (layers, heads, hidden size, architecture) and the SAE folder, so each local model
is checked from its ``config.json`` alone -- no weights loaded -- before the run directory is
opened. Doses and every other field are checked when the spec is parsed.

Scope: local models (``embedded``, a transformers directory, a ``.gguf``, a hub id in the local
cache). A remote scheme (``openai:``, ``vllm:``) among ``models`` is refused here too, from its
name alone: OWMI hooks the weights, and neither backend offers hooks (``Capability.HOOKS``). The
capability check at load would refuse it as well, but only after every model before it had run.
Remote schemes stay welcome in ``observer_models``: the observer reads text only.
"""

from __future__ import annotations

from types import SimpleNamespace

from tamperbench.errors import UserError
from tamperbench.owmi.run.context import OwmiContext
from tamperbench.owmi.run.items import spec_items

LOCAL_SCHEMES = ("embedded", "dir", "gguf", "hub")
NO_HOOK_SCHEMES = ("openai", "vllm")  # the built-in backends that cannot hook (a plugin scheme may)


def model_config(spec: str, field: str):
    """The transformers config of a local model spec, read without loading its weights."""
    from tamperbench.models.sources import resolve as resolve_source

    src = resolve_source(spec)
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(src.load_dir)
    except Exception as err:  # transformers raises many kinds for an unreadable config
        raise UserError(f"{field}: transformers cannot read the config of {src.load_dir} "
                        f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})") from None


def check_readout(spec) -> None:
    """The read-out's own needs, before any model loads: ``constrained`` needs the grammar library."""
    if spec.readout != "constrained":
        return
    from tamperbench.models.decoding.grammar import require_llguidance

    require_llguidance("readout 'constrained'")


def check_choice_options(spec, backend, field: str, n_layers: int | None = None) -> None:
    """Under ``choice``, every probe family's closed option set must be distinct token sequences under
    the model's tokenizer (checked once the tokenizer is loaded, before any forward). ``n_layers``: the
    tested model's (an observer is asked about that model's layers), by default ``backend``'s own.
    Under ``constrained``, every probe family's grammar must compile (llguidance), before any forward."""
    if spec.readout == "constrained":
        from tamperbench.models.decoding.grammar import JsonGrammar
        from tamperbench.owmi.protocol.probe_schema import probe_schema

        for fam in spec.probes:
            JsonGrammar.from_schema(probe_schema(fam, n_layers or int(backend.model.config.num_hidden_layers)) or {},
                                    option=f"{field}: readout 'constrained'")
        return
    if spec.readout != "choice":
        return
    from tamperbench.owmi.engine.choice import closed_set, tokenize

    if getattr(backend, "model", None) is None or getattr(backend, "tokenizer", None) is None:
        raise UserError(f"{field}: readout 'choice' reads next-token log-probabilities of a local model's "
                        "weights; this backend offers none (use --readout generated)")
    n_layers = n_layers or int(backend.model.config.num_hidden_layers)
    for fam in spec.probes:
        try:
            tokenize(backend.tokenizer, closed_set(fam, n_layers))
        except ValueError as err:
            raise UserError(f"{field}: readout 'choice': {err}") from None


def check_positions(spec, backend, items: dict, field: str) -> None:
    """Absolute ``positions`` must lie inside every item's task prompt under every frame, checked by
    tokenizing (no forward) before any compute. WHY: a declared position past a context is dropped by
    the hooks, so an index past every prompt ran to exit 0 with an intervention that altered nothing."""
    declared = spec.absolute_positions()
    if not declared:
        return
    from tamperbench.owmi.engine import contexts as cx
    from tamperbench.owmi.protocol.probes import system_prompt

    systems = {frame: None if frame == "neutral" else system_prompt() for frame in spec.frames()}  # Engine.frame_system
    for bench, its in items.items():
        for it in its:
            for system in systems.values():
                n = len(cx.task_context(backend, it.prompt_text(), system, "all").ids)
                if declared[-1] >= n:
                    raise UserError(f"positions: token index {declared[-1]} is beyond the prompt of item "
                                    f"{bench}/{it.id} under {field} ({n} tokens, indices 0 to {n - 1}); every "
                                    "declared position must lie inside every item's prompt")


def preflight(spec) -> None:
    """Every (model, object) of ``spec``, checked before any compute; one line naming both."""
    from tamperbench.models.registry import scheme_of
    from tamperbench.owmi.engine.objects import resolve

    check_readout(spec)
    for i, name in enumerate(spec.models):
        if scheme_of(name) in NO_HOOK_SCHEMES:
            from tamperbench.models.protocols import Capability

            raise UserError(f"models[{i}] ({name}): OWMI alters the model's internals and needs "
                            f"{Capability.HOOKS.value}, which a '{scheme_of(name)}' backend does not offer; "
                            f"{Capability.HOOKS.instead}, or list it under observer_models (text only)")
        if scheme_of(name) not in LOCAL_SCHEMES:
            continue  # a scheme registered by a plugin: its own capability check runs at load
        shim = SimpleNamespace(config=model_config(name, f"models[{i}]"))
        limit = getattr(shim.config, "max_position_embeddings", None)
        if spec.absolute_positions() and isinstance(limit, int) and max(spec.absolute_positions()) >= limit:
            raise UserError(f"positions: token index {max(spec.absolute_positions())} is beyond the context of "
                            f"models[{i}] ({name}: {limit} positions)")
        for j, obj in enumerate(spec.objects):
            resolve(shim, obj, field=f"models[{i}] ({name}): objects[{j}]")
    for i, name in enumerate(spec.observer_models):
        observer_available(name, f"observer_models[{i}]")


def observer_available(name: str, field: str) -> None:
    """A tier-2 observer whose weights are not here is refused before any model runs, without
    loading it: a packaged alias needs its package, a hub id its local cache, a path must exist
    (remote schemes are checked when they connect)."""
    from pathlib import Path

    from tamperbench.models.adapter import MARK
    from tamperbench.models.installable import installed, lookup, missing_line
    from tamperbench.models.registry import scheme_of
    from tamperbench.models.sources import HUB_ID

    scheme, base = scheme_of(name), name.partition(MARK)[0].strip()
    if scheme not in LOCAL_SCHEMES or scheme == "embedded":
        return
    model = lookup(base)
    if model is not None:  # an installable model package (models/installable.py)
        if not installed(model):
            raise UserError(f"{field}: {missing_line(model)}")
        return
    if scheme == "hub" and HUB_ID.match(base) and not Path(base).expanduser().exists():
        from huggingface_hub import snapshot_download

        try:
            snapshot_download(base, local_files_only=True, allow_patterns=["*.json"])
        except Exception:  # not in the local cache (the hub is not asked here)
            raise UserError(f"{field} ({name}): not in the local hub cache, so the run would need a download; "
                            "use an installable observer such as 'gemma3-270m' (tamperbench models install "
                            "gemma3-270m) or a local directory") from None
    elif not Path(base).expanduser().exists():
        raise UserError(f"{field} ({name}): path does not exist")


def validate(spec) -> None:
    """Every check of ``spec`` that needs no loaded model, in one place, before any compute (the
    driver's ``preflight``): the read-out's library, every (model, object) from the model's config,
    positions against each model's context, observers' weights present, and the items loaded. Each
    model's loaded checks follow in :func:`check_loaded` (a spec of several models loads one at a time)."""
    preflight(spec)
    spec_items(spec)


def check_loaded(spec, backend, model: str) -> None:
    """The checks that need ``model``'s loaded tokenizer or weights, before any forward (and before
    its observers load; the driver's ``check``): hooks and whole distributions, every declared position
    inside every item's prompt, the read-out's options or grammars, every object against the loaded model."""
    from tamperbench.owmi.engine.objects import resolve
    from tamperbench.suites import get_suite

    get_suite("owmi").check_backend(backend)  # hooks and whole distributions, or one line now
    check_positions(spec, backend, spec_items(spec), f"models ({model})")  # by tokenizing: before any forward
    check_choice_options(spec, backend, f"models ({model})")
    for i, obj in enumerate(spec.objects):
        resolve(backend.model, obj, field=f"objects[{i}]")


def context(spec, backend, console=None) -> OwmiContext:
    """The worker's context on the loaded model (the driver's ``context``): its tier-2 observers loaded,
    their read-out options checked (asked about ``backend``'s layers) before any forward, and its engine,
    picked once from the model (batched or reference)."""
    from tamperbench.owmi.engine import engine_for
    from tamperbench.runs.driver import load_model

    observers = [(o, load_model(spec, o)) for o in spec.observer_models]
    for o, ob in observers:
        check_choice_options(spec, ob, f"observer_models ({o})", int(backend.model.config.num_hidden_layers))
    return OwmiContext(spec, backend, observers, engine_for(backend, spec, observers))


def setup_worker(config: tuple) -> OwmiContext:
    """Worker setup in another process (``config``: the spec and the model under test): load it, check
    it, build its context, as the driver does in this one."""
    from tamperbench.runs.driver import load_model

    spec, model = config
    backend = load_model(spec, model)
    check_loaded(spec, backend, model)
    return context(spec, backend)
