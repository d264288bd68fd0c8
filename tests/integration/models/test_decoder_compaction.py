"""Compaction of the step decoder on a tiny random llama (config-built, no download, no mark).

Compaction moves live rows from the tail of the batch into dead slots (SlotKV.move_rows) instead of
gathering the whole batch, and now runs whenever a slot is dead. The check: rows released from the
middle of the batch, rows moved, a fork and a rollback after the move, and every surviving row still
decodes exactly what a no-cache, unpadded greedy forward over its own context gives.
"""

from __future__ import annotations

import torch

from tamperbench.models.decoding import StepDecoder

V = 96


@torch.inference_mode()
def _greedy_after(model, ctx: list[int], new: int) -> list[int]:
    ctx = list(ctx)
    start = len(ctx)
    for _ in range(new):
        ctx.append(int(model(input_ids=torch.tensor([ctx])).logits[0, -1].argmax()))
    return ctx[start:]


def _step(dec, n: int) -> None:
    for _ in range(n):
        dec.step()


def test_rows_moved_into_dead_slots_decode_exactly(tiny_llama):
    model = tiny_llama(V)
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, V, (k,), generator=g).tolist() for k in (5, 9, 4, 7, 6, 8)]
    dec = StepDecoder(model, eos_ids=[2], topk=5, capacity=6)
    rids = dec.add_rows(prompts)
    _step(dec, 4)
    dec.release([rids[1], rids[3]])  # holes in the middle; rows 4 and 5 move into them
    _step(dec, 1)
    assert dec.b == 4 and sorted(dec.live_rows()) == sorted([rids[0], rids[2], rids[4], rids[5]])
    assert sorted(dec.by_id.values()) == [0, 1, 2, 3]
    [f] = dec.fork(rids[5], 1)  # a moved row forks ...
    dec.rollback(rids[4], 2)  # ... and a moved row rolls back
    _step(dec, 6)
    dec.release([rids[0]])  # a dead slot at the front; the tail row moves
    _step(dec, 3)
    assert dec.b == 4
    for i in (2, 4, 5):
        toks = dec.tokens(rids[i])
        gen = toks[len(prompts[i]):]
        assert gen == _greedy_after(model, prompts[i], len(gen)), f"row {i}"
    # the fork continues the row it copied, from the fork point on
    ftoks = dec.tokens(f)
    k = len(prompts[5]) + 5
    assert ftoks[:k] == dec.tokens(rids[5])[:k]
    assert ftoks[k:] == _greedy_after(model, ftoks[:k], len(ftoks) - k)


def test_all_rows_released_resets_the_batch(tiny_llama):
    model = tiny_llama(V)
    dec = StepDecoder(model, eos_ids=[2], topk=5, capacity=2)
    rids = dec.add_rows([[5, 6, 7], [8, 9]])
    _step(dec, 2)
    dec.release(rids)
    assert dec.step() == [] and dec.b == 0 and dec.n == 0
    [r] = dec.add_rows([[10, 11, 12, 13]])
    _step(dec, 5)
    assert dec.generated(r) == _greedy_after(model, [10, 11, 12, 13], 5)
