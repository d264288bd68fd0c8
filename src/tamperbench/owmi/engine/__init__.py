"""OWMI's engine: a unit's forwards under hooks, its read-outs, its teacher-forced effects and its records.

What the run calls before any forward lives here, two functions: :func:`check` (a spec against one
model: from its config before it loads, then on its tokenizer and weights; :func:`check_options` for
an observer's option sets) and :func:`engine_for` (one engine per loaded model). After that the run
reads one module, ``base.py``: the :class:`~tamperbench.owmi.engine.base.Engine` interface both
engines share -- :class:`~tamperbench.owmi.engine.batched.BatchedEngine` (the conditions of a unit as
rows of one ragged batch) and :class:`~tamperbench.owmi.engine.reference.ReferenceEngine` (one
condition at a time: the oracle, and models with sliding-window attention).

The one-line errors are raised where the knowledge lives (``objects.resolve`` for an object,
``choice.tokenize`` for an option set); imports stay inside the functions, so importing a light
engine module (``objects``, ``operators``) loads no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tamperbench.errors import UserError

if TYPE_CHECKING:
    from tamperbench.owmi.engine.base import Engine


def check(spec, model, name: str, *, index: int | None = None, items: dict | None = None) -> None:
    """Every check of ``spec`` against one model that the engine makes, before any forward; each refusal
    one line naming the field. Before the model loads (``index``: its place in ``spec.models``;
    ``model``: anything with its transformers ``config``): every declared position inside the model's
    context, every object resolved from the config alone (``objects.resolve``: layers, heads, widths,
    the SAE folder). Once loaded (``model``: its backend; ``items``: the spec's items): every declared
    position inside every item's prompt under every frame (by tokenizing: a position past a context is
    dropped by the hooks, so an index past every prompt ran to exit 0 with an intervention that altered
    nothing), the read-out's option sets or grammars (:func:`check_options`), every object resolved on
    the loaded weights."""
    from tamperbench.owmi.engine.objects import resolve

    declared = spec.absolute_positions()
    if index is not None:
        limit = getattr(model.config, "max_position_embeddings", None)
        if declared and isinstance(limit, int) and max(declared) >= limit:
            raise UserError(f"positions: token index {max(declared)} is beyond the context of "
                            f"models[{index}] ({name}: {limit} positions)")
        for j, obj in enumerate(spec.objects):
            resolve(model, obj, field=f"models[{index}] ({name}): objects[{j}]")
        return
    field = f"models ({name})"
    if declared:
        _positions_inside(spec, model, items or {}, declared, field)
    check_options(spec, model, field)
    for i, obj in enumerate(spec.objects):
        resolve(model.model, obj, field=f"objects[{i}]")


def _positions_inside(spec, backend, items: dict, declared: list[int], field: str) -> None:
    """Every declared position inside every item's task prompt under every frame's system message."""
    from tamperbench.owmi.engine import contexts as cx
    from tamperbench.owmi.protocol.design import frames
    from tamperbench.owmi.protocol.probes import system_prompt

    systems = [None if frame == "neutral" else system_prompt() for frame in frames(spec.tracks, spec.track_c_system)]
    for bench, its in items.items():
        for it in its:
            for system in systems:  # Engine.frame_system
                n = len(cx.task_context(backend, it.prompt_text(), system, "all").ids)
                if declared[-1] >= n:
                    raise UserError(f"positions: token index {declared[-1]} is beyond the prompt of item "
                                    f"{bench}/{it.id} under {field} ({n} tokens, indices 0 to {n - 1}); every "
                                    "declared position must lie inside every item's prompt")


def check_options(spec, backend, field: str, n_layers: int | None = None) -> None:
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


def engine_for(backend, spec, observers: list[tuple[str, Any]] | None = None) -> Engine:
    """The engine for ``backend``'s model, picked once: batched wherever ragged rows can express its
    attention (``ragged.supported``: no sliding window), else the reference engine."""
    from tamperbench.owmi.engine.batched import BatchedEngine
    from tamperbench.owmi.engine.ragged import supported
    from tamperbench.owmi.engine.reference import ReferenceEngine

    return (BatchedEngine if supported(backend.model) else ReferenceEngine)(backend, spec, observers)
