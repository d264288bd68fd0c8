"""The step decoder's per-step statistics (models/decoding/distributions.py) after the speed-ups:
entropy computed in place, the arg-max read off the top-k. Both must give bitwise what the plain
formulas give, on the cases where they could differ: tokens whose probability underflows to 0,
masked (-inf) vocabulary entries, ties at the top (``argmax`` names the lowest id), NaN rows and a
one-hot row whose every other term is a signed zero. The reference is written out here with
``torch.where`` and ``torch.argmax``, not taken from the module under test. No model.
"""

from __future__ import annotations

import torch

from tamperbench.models.decoding.distributions import distribution, entropy, log_probs

V = 4099


def _reference_entropy(logp: torch.Tensor) -> torch.Tensor:
    p = logp.exp()
    return -(torch.where(p > 0, p * logp, torch.zeros(()))).sum(-1)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)  # float32 bit patterns: -0.0 and 0.0 differ here


def _logits() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(9, V, generator=g) * 3
    x[1, :2000] = -150.0  # exp underflows: p == 0 with a finite log-prob (the term is -0.0)
    x[2, 100:900] = float("-inf")  # masked vocabulary: 0 * -inf is NaN before the fix-up
    x[3] = 0.0
    x[3, 0] = 300.0  # one-hot: every other term underflows, the one term is 1 * log(1)
    x[4, 17] = x[4, 3] = x[4].max() + 1.0  # a tie at the top: argmax names 3, not 17
    x[5, 4000] = x[5, 9] = x[5, 2222] = x[5].max() + 2.0  # a three-way tie
    x[6, 50] = float("nan")  # a NaN row (log_softmax spreads it over the row: argmax names id 0)
    x[7] = 1.0  # all tied
    return x


def test_entropy_is_bitwise_the_where_formula():
    logp = log_probs(_logits())
    assert torch.equal(_bits(entropy(logp)), _bits(_reference_entropy(logp)))
    big = log_probs(torch.randn(46, 49152, generator=torch.Generator().manual_seed(1)) * 4)
    assert torch.equal(_bits(entropy(big)), _bits(_reference_entropy(big)))
    assert not logp.isnan().all()  # the in-place form must not write into its input
    assert torch.equal(_bits(log_probs(_logits())), _bits(logp))


def test_entropy_keeps_gradients():
    x = torch.randn(2, 50, requires_grad=True)
    logp = torch.log_softmax(x, -1)
    entropy(logp).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_greedy_is_argmax_including_ties_and_nan():
    logits = _logits()
    logp, st = distribution(logits, 20)
    want = torch.log_softmax(logits, -1).argmax(-1)
    assert torch.equal(st.greedy, want)
    assert st.greedy[4] == 3 and st.greedy[5] == 9 and st.greedy[6] == 0 and st.greedy[7] == 0
    assert torch.equal(_bits(st.entropy), _bits(_reference_entropy(logp)))
    # without ties or NaN the top-k path is taken, and it is still argmax, token for token
    clean = torch.randn(33, V, generator=torch.Generator().manual_seed(2))
    _, st = distribution(clean, 20)
    assert torch.equal(st.greedy, clean.argmax(-1))
    assert st.greedy.data_ptr() != st.topk_ids.data_ptr()  # its own storage, not a view of the top-k
    st.greedy[0] = -1
    assert st.topk_ids[0, 0] != -1
    _, one = distribution(clean, 1)  # top-1: nothing to compare the top with, argmax as before
    assert torch.equal(one.greedy, clean.argmax(-1))
