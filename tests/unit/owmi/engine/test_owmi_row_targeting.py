"""Row-targeted hooks in batched step decoding: only the chosen row is altered, also after the
decoder compacts finished rows away and the survivors change batch index.

Reference: each prompt decoded alone (batch of one), the targeted one with the same intervention.
"""

from __future__ import annotations

import torch

from tamperbench.models.hooks import hooks
from tamperbench.models.decoding.decoder import StepDecoder
from tamperbench.owmi.engine.objects import ObjectSpec, resolve
from tamperbench.owmi.engine.operators import Intervention

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


# ---------------------------------------------------------------- the batched engine's own rows
def _solo(model, prompt, steps, iv=None):
    """Reference: one prompt alone, plain forwards over an unpadded cache (no ragged.Rows)."""
    from transformers import DynamicCache

    from tamperbench.owmi.engine.forward import _cache_kw

    cache, out, ids = DynamicCache(), [], list(prompt)
    with hooks(model, iv.hook_pairs() if iv else []), torch.no_grad():
        for k in range(steps):
            new = ids if k == 0 else ids[-1:]
            if iv is not None:
                iv.phase, iv.offset = ("prefill" if k == 0 else "probe"), len(ids) - len(new)
            logits = model(input_ids=torch.tensor([new]), use_cache=True, **{_cache_kw(model): cache}).logits[0, -1]
            tok = int(logits.argmax())
            out.append((tok, float(torch.log_softmax(logits.float(), -1)[tok])))
            ids.append(tok)
    return out


def _iv(model, positions, rows=None):
    target = resolve(model, ObjectSpec(kind="resid_post", layer=1))
    return Intervention(target, "add", 6.0, positions=positions, direction=torch.nn.functional.normalize(
        torch.ones(32), dim=0), rows=rows)


def test_ragged_rows_hook_follows_its_row_through_compaction(tiny):
    """Rows of different lengths (left padding inside the block), the last row hooked at an
    absolute position of its own prompt and through every probe step; row 0 is compacted away
    after two steps so the hooked row changes batch index. Every row must decode exactly as alone."""
    from transformers import DynamicCache

    from tamperbench.owmi.engine.ragged import Rows

    prompts = PROMPTS
    declared = [2]  # position 2 of the hooked row: a different column in each row's padded block
    rows = Rows(tiny, DynamicCache(), torch.zeros(len(prompts), 0, dtype=torch.bool), ["a", "b", "c"])
    rows.attach("c", _iv(tiny, declared))
    logits = rows.extend(prompts, "prefill")[:, -1]
    got = {r: [] for r in rows.rids}
    moved = False
    for step in range(STEPS):
        toks = logits.argmax(-1)
        lps = torch.log_softmax(logits, -1)
        for i, rid in enumerate(rows.rids):
            got[rid].append((int(toks[i]), float(lps[i, toks[i]])))
        feed = [[int(toks[i])] for i in range(len(rows.rids))]
        if step == 1:
            rows.retire(["a"])
            feed = feed[1:]
            moved = rows.rids.index("c") != 2
        logits = rows.extend(feed, "probe")[:, -1]
    assert moved, "after compaction the hooked row must sit at another batch index"
    for rid, p in zip(["a", "b", "c"], prompts):
        solo = _solo(tiny, p, STEPS, _iv(tiny, declared) if rid == "c" else None)
        n = len(got[rid])
        assert [t for t, _ in got[rid]] == [t for t, _ in solo[:n]], rid
        assert all(abs(a - b) < 1e-4 for (_, a), (_, b) in zip(got[rid], solo[:n])), rid
    unhooked = _solo(tiny, prompts[2], STEPS)
    assert [t for t, _ in unhooked] != [t for t, _ in got["c"]], "the hook must change the hooked row (else vacuous)"


def test_ragged_holes_keep_a_finished_row_intact(tiny):
    """``greedy(keep=True)`` (the task answer the delayed tracks reuse): a row that finished takes
    masked holes while the others go on; continuing it later equals continuing it alone."""
    from transformers import DynamicCache

    from tamperbench.owmi.engine.ragged import Rows

    rows = Rows(tiny, DynamicCache(), torch.zeros(2, 0, dtype=torch.bool), [0, 1])
    logits = rows.extend(PROMPTS[:2], "prefill")[:, -1]
    first = int(logits[0].argmax())
    got = rows.greedy(logits, 5, {first}, "decode", keep=True)  # row 0 "finishes" on its first token
    assert got[0] == ([first], "eos") and len(got[1][0]) == 5
    assert int(rows.pos[0]) == len(PROMPTS[0]) + 1 and bool((~rows.mask[0]).any()), "holes after row 0 finished"
    cont = rows.select([0], ["x"])
    nxt = cont.extend([[7]], "probe")[0, -1]
    solo = _solo(tiny, PROMPTS[0] + [first, 7], 1)
    assert int(nxt.argmax()) == solo[0][0]
    assert abs(float(torch.log_softmax(nxt, -1).max()) - solo[0][1]) < 1e-4
