"""The layers below the hooked site run once per bottom group (``owmi/engine/bottom.py``), on the real
embedded model: rows forked from one prefix and fed the same tokens (the conditions of an item) give the
logits and keys/values the model's own forward over every row gives, to float rounding of a smaller
batch (1e-4 absolute on logits and keys/values of order 1-10), while the layers below the hook see one
row; rows fed different tokens leave their groups; a row's own hook still changes only that row.
"""

from __future__ import annotations

import pytest
import torch

from tamperbench.owmi.engine import bottom
from tamperbench.owmi.engine.objects import ObjectSpec, resolve
from tamperbench.owmi.engine.operators import Intervention
from tamperbench.owmi.engine.ragged import PrefixCache

pytestmark = pytest.mark.model


def test_hooked_layer_reads_the_site_layer():
    assert bottom.hooked_layer(["resid_post.12", "head_out.5"], 30) == 5
    assert bottom.hooked_layer(["resid_pre.3:sae#7"], 30) == 3
    assert bottom.hooked_layer([], 30) == 30


def _rows(backend, ids, split_hooks: bool):
    target = resolve(backend.model, ObjectSpec(kind="resid_post", layer=12))
    rows, fork = PrefixCache().rows(backend.model, [ids] * 4, 3, ["a", "b", "c", "d"])
    gen = torch.Generator().manual_seed(0)
    for rid in ("b", "c"):  # two hooked rows, two unhooked: four rows, one bottom group
        d = torch.randn(target.dim, generator=gen)
        rows.attach(rid, Intervention(target, "add", 8.0, direction=d / d.norm(), positions=list(range(3, len(ids)))))
    if not split_hooks:  # the model's own forward: no bottom group shared
        rows.bottom = list(range(4))
    return rows, fork


def test_shared_bottom_equals_the_plain_forward(embedded_backend):
    model = embedded_backend.model
    ids = embedded_backend.tokenizer("The capital of France is Paris, and the capital of Italy is",
                                     add_special_tokens=False)["input_ids"]
    seen: list[int] = []
    handle = model.model.layers[0].register_forward_pre_hook(lambda m, a, kw: seen.append(int(kw["hidden_states"].shape[0]
                                                                                             if "hidden_states" in kw else a[0].shape[0])),
                                                             with_kwargs=True)
    try:
        shared, fork = _rows(embedded_backend, ids, True)
        seen.clear()  # (the prefix cache's own one-row feed)
        got = shared.extend([ids[fork:]] * 4, "prefill", keep=4)
        assert seen == [1]  # the layers below the hook ran on one row for the four
        plain, _ = _rows(embedded_backend, ids, False)
        seen.clear()
        want = plain.extend([ids[fork:]] * 4, "prefill", keep=4)
        assert seen == [4]
    finally:
        handle.remove()
    assert torch.allclose(got, want, atol=1e-4, rtol=0)
    assert (got[1] - got[0]).abs().max() > 1e-2 and torch.equal(got[0], got[3])  # the hook reached its row only
    for a, b in zip(shared.cache.layers, plain.cache.layers):
        assert torch.allclose(a.keys, b.keys, atol=1e-4) and torch.allclose(a.values, b.values, atol=1e-4)
    # the next block: rows fed other tokens leave the group; the rows fed the same stay together
    tail = embedded_backend.tokenizer(" Rome", add_special_tokens=False)["input_ids"]
    other = embedded_backend.tokenizer(" Milan", add_special_tokens=False)["input_ids"]
    blocks = [tail, tail, other, tail]
    got2 = shared.extend(blocks, "probe")
    assert shared.bottom[0] == shared.bottom[1] == shared.bottom[3] != shared.bottom[2]
    assert torch.allclose(got2, plain.extend(blocks, "probe"), atol=1e-4, rtol=0)
