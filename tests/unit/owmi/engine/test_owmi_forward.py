"""Teacher-forced JS divergence (streamed) and the hook temporal scope, on tiny random models.

References: scipy's Jensen-Shannon distance (squared, natural log) for the divergence; one
full forward with a hand-written hook for the lifted / active probe semantics.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.spatial.distance import jensenshannon

from tamperbench.models.hooks import hooks
from tamperbench.owmi.engine import forward as fw
from tamperbench.owmi.engine.objects import ObjectSpec, resolve
from tamperbench.owmi.engine.operators import Intervention

IDS = [5, 17, 33, 8, 41, 12, 9, 60, 22, 4, 71, 30]
PREFIX = 7


def _iv(model, **kw):
    target = resolve(model, ObjectSpec(kind="resid_post", layer=1))
    d = torch.nn.functional.normalize(torch.arange(32, dtype=torch.float32) - 16, dim=0)
    return Intervention(target, "add", 4.0, positions=[2, 3, 4], direction=d, **kw)


def test_js_rows_matches_scipy():
    g = torch.Generator().manual_seed(0)
    lp = torch.log_softmax(torch.randn(5, 40, generator=g), -1)
    lq = torch.log_softmax(torch.randn(5, 40, generator=g) * 3, -1)
    ours = fw.js_rows(lp, lq).numpy()
    ref = np.array([jensenshannon(p, q) ** 2 for p, q in zip(lp.exp().numpy(), lq.exp().numpy())])
    assert np.allclose(ours, ref, atol=1e-6)


def test_js_divergence_streamed_in_chunks(tiny):
    full = torch.log_softmax(tiny(input_ids=torch.tensor([IDS])).logits[0].float(), -1)
    with hooks(tiny, _iv(tiny).hook_pairs()):
        alt = torch.log_softmax(tiny(input_ids=torch.tensor([IDS])).logits[0].float(), -1)
    per_pos = np.array([jensenshannon(p, q) ** 2 for p, q in zip(full[2:].exp().detach().numpy(),
                                                                 alt[2:].exp().detach().numpy())])
    for chunk in (3, 5, 64):
        mean, peak, n = fw.js_divergence(tiny, IDS, 2, _iv(tiny), chunk=chunk)
        assert n == len(IDS) - 2
        assert abs(mean - per_pos.mean()) < 1e-5 and abs(peak - per_pos.max()) < 1e-5, f"chunk={chunk}"
    sham = fw.js_divergence(tiny, IDS, 2, _iv(tiny, identity=True))
    assert sham[0] == 0.0 and sham[1] == 0.0


def _probe_logits(model, scope):
    iv = _iv(model, scope=scope)
    cache = fw.new_cache(model)
    fw.feed(model, cache, IDS[:PREFIX], 0, iv, "prefill")
    return fw.feed(model, cache, IDS[PREFIX:], PREFIX, iv, "probe", logits_to_keep=len(IDS) - PREFIX), iv


def _one_forward(model, cols):
    """Reference: one forward over the whole sequence, a hand-written hook adding the direction at ``cols``."""
    d = torch.nn.functional.normalize(torch.arange(32, dtype=torch.float32) - 16, dim=0)

    def fn(act):
        out = act.clone()
        out[:, cols] += 4.0 * d
        return out

    with torch.no_grad(), hooks(model, [("resid_post.1", fn)]):
        return model(input_ids=torch.tensor([IDS])).logits[0, PREFIX:].float()


def test_lifted_probe_is_unaltered_over_the_perturbed_cache(tiny):
    lifted, iv = _probe_logits(tiny, "lifted")
    assert sorted(iv.altered) == [2, 3, 4], "lifted: the hook must not fire on probe tokens"
    assert torch.allclose(lifted, _one_forward(tiny, [2, 3, 4]), atol=1e-4)
    with torch.no_grad():
        clean = tiny(input_ids=torch.tensor([IDS])).logits[0, PREFIX:].float()
    assert not torch.allclose(lifted, clean, atol=1e-4), "the perturbed cache must still reach the probe"


def test_active_probe_is_altered_too(tiny):
    active, iv = _probe_logits(tiny, "active")
    assert sorted(iv.altered) == [2, 3, 4, *range(PREFIX, len(IDS))]
    assert torch.allclose(active, _one_forward(tiny, [2, 3, 4, *range(PREFIX, len(IDS))]), atol=1e-4)


def test_prefill_only_vs_every_step_in_decoding(tiny):
    for when, expect_decode in (("prefill", False), ("every_step", True)):
        iv = _iv(tiny, when=when)
        cache = fw.new_cache(tiny)
        logits = fw.feed(tiny, cache, IDS[:PREFIX], 0, iv, "prefill")
        fw.greedy(tiny, cache, logits, PREFIX, 4, set(), iv, "decode")
        decoded = [p for p in iv.altered if p >= PREFIX]
        assert bool(decoded) == expect_decode, when


def test_crop_restores_the_prefix(tiny):
    cache = fw.new_cache(tiny)
    a = fw.feed(tiny, cache, IDS[:PREFIX], 0, None, "prefill")
    fw.feed(tiny, cache, IDS[PREFIX:], PREFIX, None, "probe")
    fw.crop_to(cache, PREFIX)
    assert cache.get_seq_length() == PREFIX
    b = fw.feed(tiny, cache, IDS[PREFIX:], PREFIX, None, "probe", logits_to_keep=len(IDS) - PREFIX)
    with torch.no_grad():
        ref = tiny(input_ids=torch.tensor([IDS])).logits[0, PREFIX:].float()
    assert torch.allclose(b, ref, atol=1e-4) and a.shape[-1] == 97


def test_answer_logprob_matches_full_forward(tiny):
    with torch.no_grad():
        lp = torch.log_softmax(tiny(input_ids=torch.tensor([IDS])).logits[0].float(), -1)
    want = float(sum(lp[i - 1, IDS[i]] for i in range(PREFIX, len(IDS))))
    assert abs(fw.answer_logprob(tiny, IDS[:PREFIX], IDS[PREFIX:], None) - want) < 1e-4
