"""Forward hooks on abstract sites, always removed, plus activation capture.

Why: introspection experiments read or overwrite activations at named places ("the residual
stream after layer 12", "head 3's output at layer 5") on several architectures. Two ideas borrowed:

* TransformerLens: hooks live only inside a ``with`` block and are removed in ``finally``, so an
  exception can never leave a model silently patched for the next experiment;
* pyvene: a small per-architecture table maps abstract sites to module paths, so callers never
  spell ``model.layers.12.self_attn.o_proj``.

Sites are strings ``"<site>.<layer>"``:

* ``resid_pre.L``  input of decoder layer L (the residual stream before it);
* ``resid_post.L`` / ``block_out.L`` output of decoder layer L;
* ``attn_out.L``   attention output (after o_proj, before it is added to the residual);
* ``mlp_out.L``    MLP output (before it is added to the residual);
* ``head_out.L``   per-head attention output, the input of o_proj viewed as (batch, seq, heads, head_dim).

A hook function receives the activation tensor and returns ``None`` (read only) or a tensor of
the same shape that replaces it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch

from tamperbench.errors import UserError

HookFn = Callable[[torch.Tensor], torch.Tensor | None]

_DECODER = {"layer": "model.layers.{L}", "attn": "model.layers.{L}.self_attn", "mlp": "model.layers.{L}.mlp",
            "o_proj": "model.layers.{L}.self_attn.o_proj"}
ARCHITECTURES: dict[str, dict[str, str]] = {
    name: _DECODER for name in ("llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "gemma3_text", "phi3")
}
# site -> (module key in the table, "out" for a forward hook on the output, "in" for a pre-hook on the input)
SITES = {"resid_pre": ("layer", "in"), "resid_post": ("layer", "out"), "block_out": ("layer", "out"),
         "attn_out": ("attn", "out"), "mlp_out": ("mlp", "out"), "head_out": ("o_proj", "in")}


def head_layout(config) -> tuple[int, int, int]:
    """(query heads, key-value heads, head_dim) of a config, grouped-query attention aware.

    The input of o_proj holds one ``head_dim`` slice per *query* head (KV heads are shared by
    groups of query heads before o_proj), so head h is columns ``h*head_dim:(h+1)*head_dim``.
    ``head_dim`` comes from the config when it says so (qwen3, gemma): not every model has
    ``hidden_size == heads * head_dim``.
    """
    q = int(config.num_attention_heads)
    kv = int(getattr(config, "num_key_value_heads", None) or q)
    hd = int(getattr(config, "head_dim", None) or config.hidden_size // q)
    return q, kv, hd


def check_head(model, layer: int, head: int, field: str = "head") -> None:
    """One-line refusal of a head index out of range, before any compute."""
    q, kv, _ = head_layout(model.config)
    if not 0 <= int(head) < q:
        raise UserError(f"{field}: head {head} out of range at layer {layer} (model has {q} query heads, {kv} KV heads)")


def row_targeted(fn: HookFn, rows: Callable[[], Sequence[int] | None] | Sequence[int] | None) -> HookFn:
    """Wrap ``fn`` so it alters only the batch rows ``rows`` (indices into the current batch).

    ``rows`` may be a callable evaluated at every forward: how a hook keeps following its rows
    when a batched decoder compacts finished rows away and the survivors change index (e.g.
    ``lambda: [decoder.by_id[r] for r in rids if r in decoder.by_id]``). ``None`` = every row.
    Other rows pass through bit-identical: the wrapper writes back only the chosen rows.
    """
    def wrapped(act: torch.Tensor) -> torch.Tensor | None:
        chosen = rows() if callable(rows) else rows
        if chosen is None:
            return fn(act)
        chosen = [int(r) for r in chosen if 0 <= int(r) < act.shape[0]]
        if not chosen:
            return None
        idx = torch.tensor(chosen, device=act.device)
        new = fn(act.index_select(0, idx))
        if new is None:
            return None
        out = act.clone()
        out[idx] = new.to(act.dtype)
        return out
    return wrapped


def _arch(model) -> dict[str, str]:
    kind = getattr(model.config, "model_type", None)
    if kind not in ARCHITECTURES:
        raise UserError(f"hooks: architecture '{kind}' has no site table; known: {', '.join(sorted(ARCHITECTURES))}")
    return ARCHITECTURES[kind]


def resolve_site(model, site: str) -> tuple[torch.nn.Module, str, str]:
    """'attn_out.3' -> (module, 'in'|'out', site name)."""
    name, _, layer = site.rpartition(".")
    if name not in SITES or not layer.isdigit():
        raise UserError(f"hook site '{site}': expected <site>.<layer> with site one of {', '.join(SITES)}")
    n_layers = model.config.num_hidden_layers
    if int(layer) >= n_layers:
        raise UserError(f"hook site '{site}': layer {layer} out of range (model has {n_layers} layers)")
    key, where = SITES[name]
    path = _arch(model)[key].format(L=int(layer))
    return model.get_submodule(path), where, name


def _forward_hook(fn: HookFn):
    def hook(module, args, output):
        act = output[0] if isinstance(output, tuple) else output
        new = fn(act)
        if new is None:
            return None
        return (new, *output[1:]) if isinstance(output, tuple) else new
    return hook


def _pre_hook(fn: HookFn, per_head: int | None):
    def hook(module, args, kwargs):
        if args:
            act, rest_args = args[0], args[1:]
        else:
            act, rest_args = kwargs["hidden_states"], None
        view = act.unflatten(-1, (per_head, -1)) if per_head else act
        new = fn(view)
        if new is None:
            return None
        new = new.flatten(-2) if per_head else new
        if rest_args is None:
            return args, {**kwargs, "hidden_states": new}
        return (new, *rest_args), kwargs
    return hook


@contextmanager
def hooks(model, pairs: Sequence[tuple[str, HookFn]]) -> Iterator[None]:
    """Install (site, fn) hooks for the duration of the block; removed in ``finally``."""
    handles = []
    try:
        for site, fn in pairs:
            module, where, name = resolve_site(model, site)
            if where == "out":
                handles.append(module.register_forward_hook(_forward_hook(fn)))
            else:
                heads = head_layout(model.config)[0] if name == "head_out" else None
                handles.append(module.register_forward_pre_hook(_pre_hook(fn, heads), with_kwargs=True))
        yield
    finally:
        for h in handles:
            h.remove()


@torch.inference_mode()
def capture(model, sites: Sequence[str], input_ids) -> dict[str, torch.Tensor]:
    """One forward pass over ``input_ids`` (list or 1-D/2-D tensor); returns a detached copy of
    the activation at every site, batch dimension kept."""
    ids = torch.as_tensor(input_ids, device=next(model.parameters()).device)
    if ids.dim() == 1:
        ids = ids[None]
    got: dict[str, torch.Tensor] = {}

    def keep(site):
        def fn(act):
            got[site] = act.detach().clone()
        return fn

    with hooks(model, [(s, keep(s)) for s in sites]):
        model(input_ids=ids)
    return got


@contextmanager
def capturing(model, sites: Sequence[str]) -> Iterator[dict[str, list[torch.Tensor]]]:
    """Record every forward pass inside the block (e.g. during generation): site -> list of
    detached activations, one per call."""
    got: dict[str, list[torch.Tensor]] = {s: [] for s in sites}

    def keep(site):
        def fn(act):
            got[site].append(act.detach().clone())
        return fn

    with hooks(model, [(s, keep(s)) for s in sites]):
        yield got
