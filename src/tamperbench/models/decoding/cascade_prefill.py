"""Cascade attention for prefill forwards of many query tokens over a shared prompt prefix.

Why: a forward that feeds each row's own tokens (an Exact Words item's instruction, an arm's
extra sentence) after its group's prefix would otherwise give every row a copy of that prefix's keys
and values (expanded, then concatenated by the cache, per layer) and attend each copy: measured on the
standard preset, copying alone is about a third of a 35-row forward, and it grows with the rows.
Here, as in decode (cascade.py), the rows hold only their private columns (branch and tail:
models/prefix_tree.py) and each group's prefix is read once a layer by all its rows' queries
stacked; the two parts are merged by log-sum-exp. Every query of a row sees all of its prefix
(the prefix precedes it), so the prefix part needs no causal mask; the private part carries one
(rows, 1, L, private columns) additive mask built once per forward (causal, branch padding masked).

Rounding: a softmax split in two and merged is not bitwise SDPA over the concatenated keys;
logits move by float32 rounding (the quote benchmark and tests/integration/models/test_prefix_tree.py
check greedy tokens against each prompt prefilled alone), so the provenance value names it
(cascade.MODE). Used only by the prefix tree under cascade attention.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from tamperbench.models.decoding import cascade as C

__all__ = ["PREFILL_NAME", "PrefillStep", "prefill_attention", "prefill_forward", "private_mask"]

PREFILL_NAME = "tamperbench_cascade_prefill"


def private_mask(branch: list[int], lens: list[int], S: int, L: int, device) -> torch.Tensor:
    """Additive (rows, 1, L, S + L) mask over the private columns: row ``r``'s branch is its last
    ``branch[r]`` of the first ``S`` columns; its tail query ``l`` sees tail columns up to its own.
    Padded tail queries (``l >= lens[r]``) see as a real one would; their outputs are never read."""
    m = len(branch)
    col = torch.arange(S + L, device=device)
    q = torch.arange(L, device=device)
    sp = torch.tensor(branch, device=device)
    # causal within the tail (a query sees its own column), and only the real columns of the branch
    keep = (col[None, None, :] <= S + q[None, :, None]) & (col[None, None, :] >= (S - sp)[:, None, None])
    out = torch.zeros(m, 1, L, S + L, device=device)
    return out.masked_fill_(~keep[:, None], float("-inf"))


@dataclass
class PrefillStep:
    """What the attention function needs for one prefill forward: each group's rows and prefix,
    and the private columns' additive mask (rows, 1, L, n). ``calls`` counts the layers that ran."""

    groups: list[tuple[torch.Tensor, C.SharedPrefix]]
    mask: torch.Tensor
    calls: int = 0
    layers: set = field(default_factory=set)
    _lay: tuple | None = None
    _mask_g: torch.Tensor | None = None

    def layout(self, g: int):
        if self._lay is None:
            padded = C.PaddedPrefixes.of(p for _, p in self.groups)
            self._lay = (C._layout(self.groups, self.mask.shape[0], self.mask.device), padded)
            # the query order below is (head in group j, token l): the (L, n) mask repeated per j
            self._mask_g = self.mask.repeat(1, 1, g, 1)
        return self._lay


def prefill_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                      prefill_step: PrefillStep | None = None, **kwargs):
    """``query`` (b, H, L, d); ``key``/``value`` (b, kv_heads, n, d), the rows' private columns.
    Returns ((b, L, H, d), None), as transformers' sdpa function does."""
    if prefill_step is None:
        raise RuntimeError("cascade prefill attention called without its step context (prefix_tree passes it)")
    if any(kwargs.get(k) is not None for k in ("softcap", "s_aux", "sinks", "position_bias")):
        raise RuntimeError("cascade attention does not implement soft-capping, sinks or position biases")
    b, heads, L, d = query.shape
    kvh = key.shape[1]
    g = heads // kvh
    scale = d ** -0.5 if scaling is None else float(scaling)
    lay, padded = prefill_step.layout(g)
    # head h = kv_head * g + j: the g query heads of one kv head are g * L queries against its keys
    qf = query.reshape(b, kvh, g * L, d)
    o, lse = C._attend(qf, key, value, scale, prefill_step._mask_g.to(query.dtype))
    kp, vp = padded.layer(module.layer_idx)
    G, rm = len(prefill_step.groups), lay.rows_max
    qg = qf[lay.sel].reshape(G, rm, kvh, g * L, d).permute(0, 2, 1, 3, 4).reshape(G, kvh, rm * g * L, d)
    op, lp = C._attend(qg, kp, vp, scale, padded.mask)
    op = op.reshape(G, kvh, rm, g * L, d).permute(0, 2, 1, 3, 4).reshape(G * rm, kvh, g * L, d)[lay.back]
    lp = lp.reshape(G, kvh, rm, g * L, 1).permute(0, 2, 1, 3, 4).reshape(G * rm, kvh, g * L, 1)[lay.back]
    both = torch.logaddexp(lse, lp)
    o = o * torch.exp(lse - both) + op * torch.exp(lp - both)
    prefill_step.calls += 1
    prefill_step.layers.add(module.layer_idx)
    return o.to(query.dtype).reshape(b, heads, L, d).transpose(1, 2), None


_registered = False


def prefill_forward(dec, ids, pos, cache, step: PrefillStep, logits_to_keep):
    """One prefill forward of ``dec``'s model (a StepDecoder's) with every row grouped: the rows'
    private columns in ``cache``, their prefixes read once per group (``step``)."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface

        AttentionInterface.register(PREFILL_NAME, prefill_attention)
        _registered = True
    if not all(len(idx) for idx, _ in step.groups) or sum(len(idx) for idx, _ in step.groups) != ids.shape[0]:
        raise ValueError("every row of a cascade prefill forward belongs to exactly one group")
    cfg = dec.model.config
    old = cfg._attn_implementation
    cfg._attn_implementation = PREFILL_NAME
    try:
        # a 4-D mask is handed to the attention function as it is (transformers builds none)
        logits = dec._forward(ids, step.mask, pos, cache, logits_to_keep=logits_to_keep, prefill_step=step)
    finally:
        cfg._attn_implementation = old
    layers = cfg.num_hidden_layers
    if step.calls != layers or len(step.layers) != layers:
        raise RuntimeError(f"cascade prefill attention ran in {step.calls} of {layers} layers")
    return logits
