"""Cascade (shared-prefix) attention for the step decoder's one-token steps.

Why: rows that share a long prompt prefix (Exact Words' ``depth`` preset puts the same ~4,000-token
fused document before all 74 prompts) each held and read their own copy of that prefix's keys and
values at every step: ~200 MB a row of the embedded model, so decode was bound by reading the same
prefix 38 times a step, and memory capped the batch at 38 rows. Here a group's prefix is stored
once (batch 1, :class:`SharedPrefix`) and each step reads it once for all the group's rows: their
queries are stacked into one matmul against the prefix keys (softmax statistics: max and sum),
each row's private columns (its suffix and generated tokens) are attended as before, and the two
parts are merged by log-sum-exp, as FlashInfer's and vLLM's cascade kernels do.

Why our own function: transformers has no CPU cascade attention (its paged/flash paths are GPU
kernels), but it has the documented extension point: ``AttentionInterface.register`` and
``AttentionMaskInterface.register``. :func:`cascade_forward` switches the model's
``config._attn_implementation`` to ours for one step forward only (restored in ``finally``); the
mask function returns None (the column mask travels in :class:`CascadeStep`). Prefill and suffix
forwards (many query tokens) take the same idea through decoding/cascade_prefill.py when they feed
rows after a shared prefix (the prefix tree, models/prefix_tree.py), and transformers' own attention
otherwise. The switch lives on the model's
config, so no other forward of the same model may run while a cascade step runs (the decoders of one
model are stepped from one thread; a forward that slipped in would raise, never misread, since our
function refuses to run without its step context).

Rounding: a softmax split in two and merged is not bitwise SDPA; logits move by float32 rounding,
so the mode is decided once at load and named in provenance (``shared_prefix_attention``), like the
linear kernel. ``TAMPERBENCH_SHARED_PREFIX_ATTENTION=copy`` selects the copy path (every row holds
its own copy of the prefix, as before); sliding-window models and attention modules that do not
dispatch through ``ALL_ATTENTION_FUNCTIONS`` always take it (:func:`cascade_mode` says why).
"""

from __future__ import annotations

import inspect
import os
import weakref
from dataclasses import dataclass, field

import torch

__all__ = ["ENV", "NAME", "CascadeStep", "PaddedPrefixes", "SharedPrefix", "cascade_attention", "cascade_forward", "cascade_mode"]

NAME = "tamperbench_cascade"
ENV = "TAMPERBENCH_SHARED_PREFIX_ATTENTION"  # "cascade" (default) or "copy"
SWITCH = "cascade"  # the switch's value that selects this path
# the provenance value: "cascade-tree" since prefill is a prefix tree whose forwards read each prefix
# once too (models/prefix_tree.py, decoding/cascade_prefill.py: float32 rounding apart from the one-level
# prefill recorded as "cascade-padded", where the groups' prefixes were already read in one padded
# call a step (PaddedPrefixes), and from the per-group calls before it, recorded as "cascade")
MODE = "cascade-tree"


@dataclass(eq=False)
class SharedPrefix:
    """A prompt prefix's keys and values, per layer (1, kv_heads, P, head_dim): stored once."""

    kv: list[tuple[torch.Tensor, torch.Tensor]]

    @property
    def length(self) -> int:
        return int(self.kv[0][0].shape[-2])

    @property
    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.kv)


@dataclass(eq=False)
class PaddedPrefixes:
    """The live groups' prefixes as one batch, so one fused call per layer reads all of them.

    Why: one attention call (and one log-sum-exp merge) per group per layer would be, with the ten
    documents of Exact Words' ``standard`` preset, 300 small calls a step, slower than the arithmetic
    they do. Per layer, keys and values are stacked (G, kv_heads, P_max, d); a shorter
    prefix is zero-padded after its end and its padding masked with -inf (``mask``, (G, 1, 1, P_max)),
    which adds exact zeros to the softmax. Rounding: a padded prefix's softmax is summed over more
    (zero) terms in other blocks, so it can differ from the unpadded call in the last float32 bits
    (the private columns were already padded to the batch's longest row the same way); one group is
    not stacked or padded and gives the per-group path's numbers bit for bit. Built per
    layer on first use and kept while the set of live groups stays the same (a decoder caches it).
    """

    prefixes: tuple  # the SharedPrefix objects in group order (compared by identity)
    mask: torch.Tensor | None = None  # additive, (G, 1, 1, P_max); None: every prefix has P_max columns
    _kv: dict = field(default_factory=dict)

    @classmethod
    def of(cls, prefixes) -> PaddedPrefixes:
        prefixes = tuple(prefixes)
        lens = [p.length for p in prefixes]
        mask = None
        if len(set(lens)) > 1:
            k0 = prefixes[0].kv[0][0]
            mask = torch.zeros(len(lens), 1, 1, max(lens), dtype=k0.dtype, device=k0.device)
            for gi, n in enumerate(lens):
                mask[gi, ..., n:] = float("-inf")
        return cls(prefixes, mask)

    @property
    def nbytes(self) -> int:
        """Bytes of the stacked copies (none when one group or one length: the prefixes are used as they are)."""
        return sum(k.numel() * k.element_size() * 2 for k, _ in self._kv.values()) if self._stacked else 0

    @property
    def _stacked(self) -> bool:
        return len(self.prefixes) > 1

    def layer(self, li: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not self._stacked:
            return self.prefixes[0].kv[li]
        if li not in self._kv:
            ks = [p.kv[li] for p in self.prefixes]
            _, kvh, _, d = ks[0][0].shape
            pmax = max(k.shape[-2] for k, _ in ks)
            kp = ks[0][0].new_zeros(len(ks), kvh, pmax, d)
            vp = ks[0][1].new_zeros(len(ks), kvh, pmax, d)
            for gi, (k, v) in enumerate(ks):
                kp[gi, :, : k.shape[-2]] = k[0]
                vp[gi, :, : v.shape[-2]] = v[0]
            self._kv[li] = (kp, vp)
        return self._kv[li]


@dataclass
class _Layout:
    """Where each grouped row's query goes in the padded (G, rows_max) query batch, and back."""

    rows: torch.Tensor  # (R,) the grouped slots, ascending
    sel: torch.Tensor  # (G * rows_max,) slot of each padded query row (padding repeats a real row)
    back: torch.Tensor  # (R,) position of ``rows[i]`` among the padded query rows
    rows_max: int
    every: bool  # every slot is grouped (rows == 0..b-1): the merge needs no gather or scatter


def _layout(groups: list[tuple[torch.Tensor, SharedPrefix]], b: int, device) -> _Layout:
    rmax = max(len(idx) for idx, _ in groups)
    sel: list[int] = []
    at: dict[int, int] = {}
    for gi, (idx, _) in enumerate(groups):
        ids = idx.tolist()
        at.update((s, gi * rmax + j) for j, s in enumerate(ids))
        sel.extend(ids + [ids[0]] * (rmax - len(ids)))
    rows = sorted(at)
    as_t = lambda x: torch.tensor(x, dtype=torch.long, device=device)  # noqa: E731
    return _Layout(as_t(rows), as_t(sel), as_t([at[s] for s in rows]), rmax, rows == list(range(b)))


@dataclass
class CascadeStep:
    """What the attention function needs for one step forward: each group's slots and prefix, and
    the rows' 2-D column mask over their private columns. ``calls`` counts the layers that ran.
    ``padded``: the groups' prefixes stacked (a decoder passes the one it keeps across steps)."""

    groups: list[tuple[torch.Tensor, SharedPrefix]]
    colmask: torch.Tensor  # (b, n) bool
    padded: PaddedPrefixes | None = None
    calls: int = 0
    layers: set = field(default_factory=set)
    _layout: _Layout | None = None

    def layout(self) -> tuple[_Layout, PaddedPrefixes]:
        """Built at the first layer, shared by the others."""
        if self.padded is None or self.padded.prefixes != tuple(p for _, p in self.groups):
            self.padded = PaddedPrefixes.of(p for _, p in self.groups)
        if self._layout is None:
            self._layout = _layout(self.groups, self.colmask.shape[0], self.colmask.device)
        return self._layout, self.padded


def _dispatches_through_interface(model) -> bool:
    """Every attention module's forward looks its function up in ``ALL_ATTENTION_FUNCTIONS`` (the
    only way ours gets called) after ``cache.update`` (so the keys it gets are the slot columns)."""
    kinds = {type(mod) for mod in model.modules() if type(mod).__name__.endswith("Attention") and hasattr(mod, "layer_idx")}
    return bool(kinds) and all(_dispatches(kind) for kind in kinds)


_DISPATCH: dict[type, bool] = {}


def _dispatches(kind: type) -> bool:
    if kind not in _DISPATCH:
        try:
            src = inspect.getsource(kind.forward)  # type: ignore[attr-defined]
        except (OSError, TypeError):
            src = ""
        _DISPATCH[kind] = "ALL_ATTENTION_FUNCTIONS" in src and "cache.update" in src
    return _DISPATCH[kind]


def cascade_mode(model, window: int | None = None) -> tuple[str | None, str]:
    """(MODE, "") where this model's steps can read a shared prefix once; else (None, why).

    The environment switch is read on every call (one process can time both paths); loaders call
    this once and record the result in provenance."""
    want = os.environ.get(ENV, SWITCH)
    if want not in (SWITCH, "copy"):
        from tamperbench.errors import UserError

        raise UserError(f"{ENV}: '{want}' is not one of cascade, copy")
    if want == "copy":
        return None, f"{ENV}=copy"
    from tamperbench.models.decoding.kv_slots import sliding_window_of

    if window is not None or sliding_window_of(model.config) is not None:
        return None, "sliding-window attention (the window is built from each row's positions)"
    if getattr(model.config, "_attn_implementation", None) not in ("sdpa", "eager"):
        return None, f"attention implementation {model.config._attn_implementation!r}"
    if not _dispatches_through_interface(model):
        return None, "attention modules that do not dispatch through transformers' AttentionInterface"
    return MODE, ""


def _no_mask(*args, **kwargs):
    return None


_registered = False


def _register() -> None:
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface

        AttentionInterface.register(NAME, cascade_attention)
        AttentionMaskInterface.register(NAME, _no_mask)
        _registered = True


def _attend(q, k, v, scale: float, mask=None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T * scale, masked) @ v and its log-sum-exp, per (batch, head, query).

    q (B, h, m, d), k/v (B, h, n, d), mask (B, 1, 1, n) additive float or None. On CPU torch's
    fused flash kernel (blocked online softmax: no (m, n) score matrix in memory, 3x faster than
    matmul + exp + matmul at 74 rows x 4,000 prefix columns); elsewhere the same in plain ops."""
    if q.device.type == "cpu" and _FLASH_CPU is not None:
        o, lse = _FLASH_CPU(q, k, v, 0.0, False, attn_mask=mask, scale=scale)
        return o.float(), lse.float()[..., None]
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if mask is not None:
        s = s + mask
    lse = torch.logsumexp(s, -1, keepdim=True)
    return torch.matmul(torch.exp(s - lse), v.float()), lse


_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def cascade_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                      cascade_step: CascadeStep | None = None, **kwargs):
    """One query token per row: ``query`` (b, H, 1, d); ``key``/``value`` (b, kv_heads, n, d), the
    rows' private columns. Returns ((b, 1, H, d), None), as transformers' sdpa function does."""
    if cascade_step is None:
        raise RuntimeError("cascade attention called without its step context (StepDecoder.step passes it)")
    if any(kwargs.get(k) is not None for k in ("softcap", "s_aux", "sinks", "position_bias")):
        raise RuntimeError("cascade attention does not implement soft-capping, sinks or position biases")
    b, heads, q_len, d = query.shape
    if q_len != 1:
        raise RuntimeError(f"cascade attention is for one-token steps, got {q_len} query tokens")
    kvh = key.shape[1]
    g = heads // kvh
    scale = d ** -0.5 if scaling is None else float(scaling)
    # head h = kv_head * g + j (transformers' repeat_kv), so (b, H, 1, d) -> (b, kv_heads, g, d):
    # the g query heads of one kv head are g queries against its keys
    qf = query.reshape(b, kvh, g, d)
    colmask = cascade_step.colmask
    if colmask.dtype == torch.bool:
        colmask = torch.zeros(colmask.shape, dtype=torch.float32, device=colmask.device).masked_fill_(
            ~colmask, float("-inf"))
        cascade_step.colmask = colmask  # built once a step, reused by every layer
    o, lse = _attend(qf, key, value, scale, colmask[:, None, None, :].to(query.dtype))
    if cascade_step.groups:
        # every group's rows in one call over the stacked prefixes: each prefix is read once, a
        # group's queries (kv_heads, rows_max * g) meet only its own prefix (PaddedPrefixes)
        lay, padded = cascade_step.layout()
        kp, vp = padded.layer(module.layer_idx)
        G, rm = len(cascade_step.groups), lay.rows_max
        qg = qf[lay.sel].reshape(G, rm, kvh, g, d).permute(0, 2, 1, 3, 4).reshape(G, kvh, rm * g, d)
        op, lp = _attend(qg, kp, vp, scale, padded.mask)
        op = op.reshape(G, kvh, rm, g, d).permute(0, 2, 1, 3, 4).reshape(G * rm, kvh, g, d)[lay.back]
        lp = lp.reshape(G, kvh, rm, g, 1).permute(0, 2, 1, 3, 4).reshape(G * rm, kvh, g, 1)[lay.back]
        if lay.every:
            both = torch.logaddexp(lse, lp)
            o = o * torch.exp(lse - both) + op * torch.exp(lp - both)
        else:
            rows = lay.rows
            lo = lse[rows]
            both = torch.logaddexp(lo, lp)
            o[rows] = o[rows] * torch.exp(lo - both) + op * torch.exp(lp - both)
    cascade_step.calls += 1
    cascade_step.layers.add(module.layer_idx)
    return o.to(query.dtype).reshape(b, heads, 1, d).transpose(1, 2), None


_PADDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # decoder -> its PaddedPrefixes


def cascade_forward(dec, ids, am, pos, groups: list[tuple[torch.Tensor, SharedPrefix]]):
    """One step forward of ``dec`` (a StepDecoder) with its grouped rows reading their prefix once."""
    _register()
    cfg = dec.model.config
    step = CascadeStep(groups, am, _PADDED.get(dec))
    old = cfg._attn_implementation
    cfg._attn_implementation = NAME
    try:
        logits = dec._forward(ids, am, pos, dec.kv.cache, cascade_step=step)
    finally:
        cfg._attn_implementation = old
    if step.padded is not None:
        _PADDED[dec] = step.padded  # kept while the live groups stay the same
    layers = cfg.num_hidden_layers
    if step.calls != layers or len(step.layers) != layers:  # never decode with a layer that skipped the prefix
        raise RuntimeError(f"cascade attention ran in {step.calls} of {layers} layers; "
                           f"set {ENV}=copy for this model")
    return logits
