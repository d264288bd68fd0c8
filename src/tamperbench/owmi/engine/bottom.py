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
            groups: Sequence[int], split: int, keys: Sequence | None = None, real: Sequence[int] | None = None,
            store=None) -> torch.Tensor:
    """Logits (rows, keep, V) of feeding ``ids`` (rows, W) at ``pos`` with attention ``mask`` (2-D
    (rows, columns), 4-D, or None) into ``cache``; layers below ``split`` on one row per bottom group
    (``groups[r]``: row r's group label), the rest on every row. Hooks must sit at layers >= ``split``.

    ``store`` (a ``lower.LowerStore``): a group whose representative row has a key (``keys[r]``, None: not
    kept) found there takes its hidden state at ``split`` and its lower keys/values from it (its last
    ``real[r]`` columns; the columns before them are padding, masked) instead of running the layers below;
    a group computed here is put there."""
    inner = model.model
    reps = list(dict.fromkeys(groups))
    first = {g: r for r, g in reversed(list(enumerate(groups)))}
    rep_rows = [first[g] for g in reps]
    inv = torch.tensor([reps.index(g) for g in groups], dtype=torch.long, device=ids.device)
    # the whole batch's mask and rotary embedding, taken before the cache's lower layers grow
    full_h = inner.embed_tokens.weight.new_empty((ids.shape[0], 1, inner.embed_tokens.weight.shape[-1]))
    from transformers.masking_utils import create_causal_mask

    mask_full = create_causal_mask(config=model.config, inputs_embeds=full_h.expand(-1, ids.shape[1], -1),
                                   attention_mask=mask, cache=cache, position_ids=pos)
    pe_full = inner.rotary_emb(full_h, position_ids=pos)
    if split:
        h = _below(model, cache, ids, mask, pos, rep_rows, split, inv,
                   [keys[r] if keys is not None else None for r in rep_rows],
                   [real[r] if real is not None else ids.shape[1] for r in rep_rows], store)
    else:
        h = inner.embed_tokens(ids[torch.tensor(rep_rows, dtype=torch.long, device=ids.device)])
    h = h[inv]
    for layer in inner.layers[split:]:
        h = layer(h, attention_mask=mask_full, position_ids=pos, cache=cache, use_cache=True, position_embeddings=pe_full)
    h = inner.norm(h[:, -keep:])
    return model.lm_head(h)


def _below(model, cache, ids, mask, pos, rep_rows: list[int], split: int, inv, keys: list, real: list[int],
           store) -> torch.Tensor:
    """The hidden states entering layer ``split`` of the representative rows ``rep_rows`` (reps, W, hidden):
    from ``store`` where kept, else computed on those rows alone; every row's lower keys/values appended
    to ``cache`` (its group's: ``inv``)."""
    from transformers import DynamicCache
    from transformers.masking_utils import create_causal_mask

    inner, w = model.model, ids.shape[1]
    got = {j: e for j, e in enumerate(store.get(k) if store is not None and k is not None else None for k in keys)
           if e is not None}
    miss = [j for j in range(len(rep_rows)) if j not in got]
    h = kv = None
    if miss:
        idx = torch.tensor([rep_rows[j] for j in miss], dtype=torch.long, device=ids.device)
        low = rows_of(cache, [rep_rows[j] for j in miss], split) if cache.get_seq_length() else DynamicCache()
        h = inner.embed_tokens(ids[idx])
        rmask, rpos = (None if mask is None else mask[idx]), pos[idx]
        mask_low = create_causal_mask(config=model.config, inputs_embeds=h, attention_mask=rmask, cache=low,
                                      position_ids=rpos)
        pe_low = inner.rotary_emb(h, position_ids=rpos)
        for layer in inner.layers[:split]:
            h = layer(h, attention_mask=mask_low, position_ids=rpos, cache=low, use_cache=True, position_embeddings=pe_low)
        kv = [(low.layers[i].keys[:, :, -w:], low.layers[i].values[:, :, -w:]) for i in range(split)]
        if store is not None:
            for a, j in enumerate(miss):
                n = real[j]
                if keys[j] is not None:
                    store.put(keys[j], (h[a, w - n:].clone(), [(k[a, :, w - n:].clone(), v[a, :, w - n:].clone())
                                                             for k, v in kv]))
    if got:  # assemble: kept rows' real columns at the right, their padding zeros (masked)
        full = torch.zeros((len(rep_rows), w, inner.embed_tokens.weight.shape[-1]), dtype=inner.embed_tokens.weight.dtype,
                           device=ids.device)
        some = next(iter(got.values()))[1] if not kv else [(k[0], v[0]) for k, v in kv]
        kvs = [(torch.zeros((len(rep_rows), *k.shape[-3:-2], w, k.shape[-1]), dtype=k.dtype, device=k.device),
                torch.zeros((len(rep_rows), *v.shape[-3:-2], w, v.shape[-1]), dtype=v.dtype, device=v.device))
               for k, v in some]
        if miss and kv is not None:
            at = torch.tensor(miss, dtype=torch.long, device=ids.device)
            full[at] = h
            for (K, V), (k, v) in zip(kvs, kv):
                K[at], V[at] = k, v
        for j, (hh, ekv) in got.items():
            n = hh.shape[0]
            if n:
                full[j, w - n:] = hh
                for (K, V), (k, v) in zip(kvs, ekv):
                    K[j, :, w - n:], V[j, :, w - n:] = k, v
        h, kv = full, kvs
    assert h is not None and kv is not None
    for i, (k, v) in enumerate(kv):  # the group's new keys/values, copied to each of its rows
        cache.update(k[inv], v[inv], i)
    return h
