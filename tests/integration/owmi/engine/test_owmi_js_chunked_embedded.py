"""The streamed (chunked) teacher-forced JS divergence equals the unchunked one on the embedded model.

Reference: one forward over the whole sequence without a KV cache, the intervention hooked at its
declared positions, the whole [T x V] log-probs held at once, and scipy's Jensen-Shannon distance
(squared, float64) per position. The streamed computation processes positions in chunks over the
KV cache with only a chunk x vocabulary block alive; it must agree to ~1e-6 whatever the chunk
(one that divides the length, two that do not), and whether the baseline is kept (short
sequences) or streamed alongside (over the engine's byte budget).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tamperbench.models.hooks import hooks
from tamperbench.owmi.engine import forward as fw
from tamperbench.owmi.engine.objects import ObjectSpec, resolve
from tamperbench.owmi.engine.operators import Intervention

pytestmark = pytest.mark.model
START, DECLARED = 10, list(range(10, 41))


def _ids(backend, n):
    text = "The river runs past the old mill, where the miller counts sacks of grain and tells stories. " * 20
    return backend.tokenizer(text, add_special_tokens=False)["input_ids"][:n]


def _iv(model):
    target = resolve(model, ObjectSpec(kind="resid_post", layer=12))
    d = torch.nn.functional.normalize(torch.randn(target.dim, generator=torch.Generator().manual_seed(3)), dim=0)
    return Intervention(target, "add", 8.0, positions=DECLARED, direction=d)


def test_chunked_js_equals_unchunked(embedded_backend):
    model = embedded_backend.model
    ids = _ids(embedded_backend, 96)
    assert len(ids) == 96
    with torch.inference_mode():
        base = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
        iv = _iv(model)
        iv.phase, iv.offset = "prefill", 0
        with hooks(model, iv.hook_pairs()):
            alt = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
    from scipy.spatial.distance import jensenshannon  # here, not at collection: 0.3 s the fast suite never uses

    per_pos = np.array([jensenshannon(p, q) ** 2 for p, q in zip(base[START:].exp().numpy(), alt[START:].exp().numpy())])
    assert per_pos.max() > 1e-3  # the intervention moves the distributions: the comparison can fail
    for chunk in (32, 45, 7):
        mean, peak, n = fw.js_divergence(model, ids, START, _iv(model), chunk=chunk)
        assert n == len(ids) - START
        assert mean == pytest.approx(per_pos.mean(), abs=1e-6), chunk
        assert peak == pytest.approx(per_pos.max(), abs=1e-6), chunk


def test_kept_and_streamed_baseline_agree(embedded_backend):
    model = embedded_backend.model
    ids = _ids(embedded_backend, 100)
    kept = list(fw.distributions(model, ids, START, None, 32))
    assert [c.shape[0] for c in kept] == [22, 32, 32, 4]  # chunk x vocabulary blocks, never T x V
    a = fw.js_divergence(model, ids, START, _iv(model), chunk=32, baseline=kept)
    b = fw.js_divergence(model, ids, START, _iv(model), chunk=32)
    assert a[2] == b[2] and a[0] == pytest.approx(b[0], abs=1e-9) and a[1] == pytest.approx(b[1], abs=1e-9)
