"""The layers below the hooked site, computed once per distinct row: a forward split at the first hooked layer.

Why: every condition of an item runs the same tokens (Tracks A and B_masked, the teacher-forced effects,
the task prompt, every option trie of a family) through the same layers up to the hooked site, and no hook
reads or writes anything below it: those rows' activations and keys/values there are equal. So a batch's
rows fall into *bottom groups* (``ragged.Rows.bottom``: rows forked from one prefix and fed the same
blocks since), and :func:`forward` runs the layers below ``split`` on one representative row per group,
copies their hidden states and new keys/values to every row of the group, and runs the layers from
``split`` on (the hooks' layers) on every row. The cache keeps one entry per row in every layer, so
selecting, compacting and cropping rows work as before.

Only decoders laid out as ``model.model.{embed_tokens, layers, norm, rotary_emb}`` with ``model.lm_head``
(Llama, Qwen2/3, Mistral: the ragged engine's models) take this path (:func:`splittable`); the result equals
the plain forward up to float rounding of a smaller batch (the engine-equivalence tests bound it).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def rows_of(cache, order: Sequence[int], layers: int | None = None):
    """A cache of rows ``order`` of ``cache`` (its first ``layers`` layers; all by default) that leaves
    ``cache`` intact: views where ``order`` is a contiguous run of rows (a forward appends by
    concatenation, a new tensor, so a view is never written through), copies otherwise."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    order = list(order)
    lo = order[0] if order else 0
    run = order == list(range(lo, lo + len(order)))
    idx = torch.tensor(order, dtype=torch.long)
    out = DynamicCache()
    picked = []
    for layer in list(cache.layers)[:layers]:
        new = DynamicLayer()
        k = layer.keys[lo: lo + len(order)] if run else layer.keys[idx.to(layer.keys.device)]
        v = layer.values[lo: lo + len(order)] if run else layer.values[idx.to(layer.values.device)]
        new.lazy_initialization(k, v)
        new.keys, new.values = k, v
        picked.append(new)
    out.layers = picked
    return out


def splittable(model) -> bool:
    inner = getattr(model, "model", None)
    return all(hasattr(inner, a) for a in ("embed_tokens", "layers", "norm", "rotary_emb")) and hasattr(model, "lm_head")


def hooked_layer(sites: Sequence[str], n_layers: int) -> int:
    """The first decoder layer any of ``sites`` (``<site>.<layer>``, ``models/hooks.py``) reads or writes
    (``n_layers`` for none): the layers below it run unhooked."""
    got = n_layers
    for site in sites:
        layer = site.split(":")[0].rpartition(".")[2]
        got = min(got, int(layer)) if layer.isdigit() else 0
    return got


@torch.inference_mode()
def forward(model, cache, ids: torch.Tensor, mask: torch.Tensor | None, pos: torch.Tensor, keep: int,
            groups: Sequence[int], split: int) -> torch.Tensor:
    """Logits (rows, keep, V) of feeding ``ids`` (rows, W) at ``pos`` with attention ``mask`` (2-D
    (rows, columns), 4-D, or None) into ``cache``; layers below ``split`` on one row per bottom group
    (``groups[r]``: row r's group label), the rest on every row. Hooks must sit at layers >= ``split``."""
    from transformers import DynamicCache
    from transformers.masking_utils import create_causal_mask

    inner, cfg = model.model, model.config
    reps = list(dict.fromkeys(groups))
    first = {g: r for r, g in reversed(list(enumerate(groups)))}
    rep_idx = torch.tensor([first[g] for g in reps], dtype=torch.long, device=ids.device)
    inv = torch.tensor([reps.index(g) for g in groups], dtype=torch.long, device=ids.device)
    past = cache.get_seq_length()
    emb = inner.embed_tokens(ids[rep_idx])
    # the whole batch's mask and rotary embedding, taken before the cache's lower layers grow
    full_h = emb.new_empty((ids.shape[0], 1, emb.shape[-1]))
    mask_full = create_causal_mask(config=cfg, inputs_embeds=full_h.expand(-1, ids.shape[1], -1),
                                   attention_mask=mask, cache=cache, position_ids=pos)
    pe_full = inner.rotary_emb(full_h, position_ids=pos)
    low = rows_of(cache, [first[g] for g in reps], split) if past and split else DynamicCache()
    rmask = None if mask is None else mask[rep_idx]
    rpos = pos[rep_idx]
    h = emb
    if split:
        mask_low = create_causal_mask(config=cfg, inputs_embeds=emb, attention_mask=rmask, cache=low, position_ids=rpos)
        pe_low = inner.rotary_emb(emb, position_ids=rpos)
        for layer in inner.layers[:split]:
            h = layer(h, attention_mask=mask_low, position_ids=rpos, cache=low, use_cache=True, position_embeddings=pe_low)
        w = ids.shape[1]
        for i in range(split):  # the group's new keys/values, copied to each of its rows
            cache.update(low.layers[i].keys[:, :, -w:][inv], low.layers[i].values[:, :, -w:][inv], i)
    h = h[inv]
    for layer in inner.layers[split:]:
        h = layer(h, attention_mask=mask_full, position_ids=pos, cache=cache, use_cache=True, position_embeddings=pe_full)
    h = inner.norm(h[:, -keep:])
    return model.lm_head(h)
