"""The stacked prefix copy of cascade attention (decoding/cascade.py, PaddedPrefixes) in the batch rule.

When a call's groups have prefixes of different lengths, each step reads them from one stacked copy
(groups x the longest prefix); models/memory.py must count it once, and the admitter must say how
many columns it holds. Hand-computed bytes; SmolLM2-135M's dims (46,080 KV bytes a token, float32).
"""

from __future__ import annotations

from tamperbench.models import memory as M
from tamperbench.models.prefix_groups import Group
from tamperbench.models.prefix_share import PrefixAdmitter


def test_the_stacked_copy_is_counted_once_by_hand(smollm2_shape):
    base = M.footprint(smollm2_shape, 58, prompt_len=420, new_tokens=96, private_len=90, shared_tokens=3300)
    # ten documents, the longest 380 tokens: 10 x 380 = 3,800 columns x 46,080 bytes = 175,104,000
    padded = M.footprint(smollm2_shape, 58, prompt_len=420, new_tokens=96, private_len=90, shared_tokens=3300,
                         padded_tokens=3800)
    assert padded - base == 175_104_000
    assert M.footprint(smollm2_shape, 59, prompt_len=420, new_tokens=96, private_len=90, shared_tokens=3300,
                       padded_tokens=3800) - padded == M.footprint(
        smollm2_shape, 59, prompt_len=420, new_tokens=96, private_len=90, shared_tokens=3300) - base  # not per row


def _admitter(prefixes):
    adm = PrefixAdmitter(None, [], share=False)
    adm.groups = [Group(p, [i]) for i, p in enumerate(prefixes)]
    return adm


def test_padded_tokens_by_hand():
    assert _admitter([300, 350, 0, 280]).padded_tokens() == 3 * 350  # the ungrouped prompt holds no prefix
    assert _admitter([300]).padded_tokens() == 0  # one group: read as it is
    assert _admitter([300, 300, 0]).padded_tokens() == 600  # one length: stacked (a copy), not padded
