"""Row-targeted hooks in batched step decoding: only the chosen row is altered, also after the
decoder compacts finished rows away and the survivors change batch index.

Reference: each prompt decoded alone (batch of one), the targeted one with the same intervention.
"""

from __future__ import annotations

import torch

from tamperbench.models.hooks import hooks
from tamperbench.models.step_decoder import StepDecoder
from tamperbench.owmi.objects import ObjectSpec, resolve
from tamperbench.owmi.operators import Intervention

PROMPTS = [[5, 9, 14], [7, 3, 22, 40, 8], [11, 12, 60, 33]]
STEPS = 6


def _decode(model, prompts, target_index, rows_mode, release_after=2):
    target = resolve(model, ObjectSpec(kind="resid_post", layer=1))
    direction = torch.nn.functional.normalize(torch.ones(32), dim=0)
    dec = StepDecoder(model, eos_ids=[1], topk=3, capacity=len(prompts), device="cpu")
    holder = {}
    if target_index is None:
        rows = []
    elif rows_mode == "follow":
        rows = lambda: holder["rows"]() if "rows" in holder else [target_index]  # noqa: E731
    else:  # a fixed index: wrong once rows move
        rows = [target_index]
    iv = Intervention(target, "add", 6.0, direction=direction, when="every_step", rows=rows)
    out = {}
    with hooks(model, iv.hook_pairs()):
        rids = dec.add_rows(prompts)
        tr = rids[target_index] if target_index is not None else None
        holder["rows"] = lambda: [dec.by_id[tr]] if tr is not None and tr in dec.by_id else []
        iv.phase = "decode"
        for step in range(STEPS):
            for res in dec.step():
                out.setdefault(res.row, []).append((res.token, res.logprob))
            if step == release_after and len(prompts) > 1:
                dec.release([rids[0]])
    return [out[r] for r in rids], dec


# The targeted row is the last one: whatever the compaction strategy (a full gather, or the tail
# rows moved into the holes), releasing row 0 moves it to another batch index.
TARGET = len(PROMPTS) - 1


def test_hook_follows_its_row_through_compaction(tiny):
    batched, dec = _decode(tiny, PROMPTS, TARGET, "follow")
    assert dec.b < len(PROMPTS), "the decoder must have compacted the released row away"
    assert dec.by_id[sorted(dec.by_id)[-1]] != TARGET, "the targeted row must have changed batch index"
    for i, p in enumerate(PROMPTS):
        solo, _ = _decode(tiny, [p], 0 if i == TARGET else None, "follow")
        n = len(batched[i])
        assert [t for t, _ in batched[i]] == [t for t, _ in solo[0][:n]], f"row {i} tokens differ from its solo run"
        assert all(abs(a - b) < 1e-4 for (_, a), (_, b) in zip(batched[i], solo[0][:n])), f"row {i} log-probs"


def test_fixed_index_hits_the_wrong_row_after_compaction(tiny):
    """The control that shows the test above can fail: a fixed batch index goes stale."""
    follow, _ = _decode(tiny, PROMPTS, TARGET, "follow")
    stale, _ = _decode(tiny, PROMPTS, TARGET, "fixed")
    assert follow[TARGET] != stale[TARGET], "after compaction the stale index must miss its row"
