"""Steps without per-token statistics (StepDecoder.per_token_stats = False, what plain generation
uses): the same tokens, log-probs and look-ahead as with them, the skipped statistics NaN / -1
(never a plausible value), and ``greedy_distribution`` picks ``distribution``'s token on ties,
NaN and masked vocabulary entries. Tiny random llama (no download) and hand-made logits."""

from __future__ import annotations

import math

import pytest
import torch

from tamperbench.models.decoding import StepDecoder
from tamperbench.models.decoding.distributions import distribution, greedy_distribution

V = 64


def _run(model, prompts, stats: bool):
    dec = StepDecoder(model, eos_ids=[2], capacity=4)
    dec.per_token_stats = stats
    rows = dec.add_rows(prompts)
    out, lps = [], []
    for i in range(7):
        force = {rows[1]: 5} if i == 2 else None  # a forced token
        out.append([(r.token, r.logprob, r.next_greedy) for r in dec.step(force)])
        if i == 4:
            dec.rollback(rows[0], 1)  # the free one-token rollback restores the held distribution
            dec.rollback(rows[2], 3)  # a deep one re-feeds
        lps.append(dec.pending_logprobs(dec.live_rows()).clone())
    return dec, rows, out, lps


def test_steps_without_statistics_give_the_same_tokens(tiny_llama):
    model = tiny_llama(V)
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, V, (n,), generator=g).tolist() for n in (5, 9, 3)]
    dec_a, rows_a, out_a, lp_a = _run(model, prompts, True)
    dec_b, rows_b, out_b, lp_b = _run(model, prompts, False)
    assert out_a == out_b  # tokens, their log-probs and the look-ahead, bit for bit
    assert all(torch.equal(x, y) for x, y in zip(lp_a, lp_b, strict=True))
    assert [dec_a.generated(r) for r in rows_a] == [dec_b.generated(r) for r in rows_b]
    res = dec_b.step()
    assert all(math.isnan(r.entropy) and math.isnan(r.entropy_topk) for r in res)
    assert all(r.topk_ids == [-1] * 20 and all(math.isnan(x) for x in r.topk_logprobs) for r in res)
    assert all(math.isfinite(r.entropy) and -1 not in r.topk_ids for r in dec_a.step())


@pytest.mark.parametrize(("row", "expect"), [
    ([0.5, 2.0, 2.0, -1.0], 1),  # a tie at the top: the lowest id, as argmax
    ([1.0, float("nan"), 3.0, 0.0], 0),  # a NaN logit makes every log-prob NaN: argmax names the first
    ([float("-inf"), 1.0, float("-inf"), 0.5], 1),  # masked entries
    ([3.0, 1.0, 2.0, 2.5], 0),  # a unique top
])
def test_greedy_distribution_picks_distributions_token(row, expect):
    logits = torch.tensor([row, [0.0, 0.1, 0.2, 0.3]])
    logp, full = distribution(logits, 2)
    logp2, lite = greedy_distribution(logits, 2)
    assert torch.equal(lite.greedy, full.greedy)
    assert torch.equal(logp.nan_to_num(), logp2.nan_to_num())
    assert int(lite.greedy[0]) == expect and int(lite.greedy[1]) == 3  # the expected ids by hand


@pytest.mark.model
def test_generate_chat_steps_without_statistics(embedded_backend):
    """Plain generation reads no entropies: its decoder skips them (and says so in the stats)."""
    embedded_backend.generate_chat([[{"role": "user", "content": "Name a colour."}]], max_new_tokens=2, progress=False)
    assert embedded_backend.generation_stats["per_token_stats"] is False
