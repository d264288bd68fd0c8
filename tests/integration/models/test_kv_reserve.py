"""Pre-sized KV buffers (SlotKV.reserve / StepDecoder.reserve_columns) on a tiny random llama
(config-built, no download, no mark).

Why: growing the buffers ``column_chunk`` columns at a time reallocates and copies every layer's
keys and values each time (about 3% of a Sleight of Word run); the swap engine now reserves its
longest row once. The checks: a reserved decoder never reallocates while rows are added (one wider
than the batch, which shifts every row right inside the buffers), stepped past several chunks,
forked, rolled back and released; and every step's tokens, log-probs, entropies and the final
pending distributions are bitwise those of the growing path. The reference values come from the
growing path (the code this replaces), not from the reserved one.
"""

from __future__ import annotations

import torch

from tamperbench.models.decoding import StepDecoder

V = 96
CHUNK = 8  # small chunks: the growing path reallocates many times in a short run


def _script(dec: StepDecoder) -> tuple[list, torch.Tensor]:
    """Rows in and out, forks, rollbacks; returns every step's results and the final log-probs."""
    g = torch.Generator().manual_seed(5)
    seen = []

    def steps(n: int) -> None:
        for _ in range(n):
            seen.append([(r.row, r.token, r.logprob, r.entropy, r.entropy_topk, r.topk_ids, r.topk_logprobs)
                         for r in dec.step()])

    [a] = dec.add_rows([torch.randint(3, V, (3,), generator=g).tolist()])
    steps(2)
    # wider than the batch's columns: every live row moves right (in place once reserved)
    b, c = dec.add_rows([torch.randint(3, V, (12,), generator=g).tolist(),
                         torch.randint(3, V, (7,), generator=g).tolist()])
    steps(11)
    [f] = dec.fork(b, 1)
    dec.rollback(a, 1)
    steps(9)
    dec.rollback(c, 3)
    dec.release([b])
    [d] = dec.add_rows([torch.randint(3, V, (5,), generator=g).tolist()])
    steps(14)
    return seen, dec.pending_logprobs([a, c, d, f]).clone()


def test_reserved_decoder_never_reallocates_and_matches_the_growing_path(tiny_llama):
    model = tiny_llama(V)
    grow = StepDecoder(model, eos_ids=[2], topk=5, capacity=4, column_chunk=CHUNK)
    ref, ref_logp = _script(grow)
    assert grow.kv.reallocations >= 4  # the path being replaced really grew, several times

    dec = StepDecoder(model, eos_ids=[2], topk=5, capacity=4, column_chunk=CHUNK)
    assert dec.reserve_columns(64)
    assert dec.kv.reallocations == 1 and dec.kv.columns == 64
    got, got_logp = _script(dec)
    assert dec.kv.reallocations == 1, "a reserved decoder reallocated inside the run"
    assert dec.n <= 64
    assert got == ref  # tokens, log-probs, entropies, top-k: exact float equality, step by step
    assert torch.equal(got_logp, ref_logp)


def test_a_row_longer_than_the_reservation_still_grows(tiny_llama):
    model = tiny_llama(V)
    dec = StepDecoder(model, eos_ids=[2], topk=5, capacity=2, column_chunk=CHUNK)
    assert dec.reserve_columns(10)
    [r] = dec.add_rows([list(range(3, 9))])
    for _ in range(8):  # 6 + 8 columns > 10
        dec.step()
    assert dec.kv.reallocations == 2 and dec.kv.columns >= dec.n == 14
    assert len(dec.generated(r)) == 8


def test_reserve_refuses_more_than_a_quarter_of_free_memory(monkeypatch, tiny_llama):
    model = tiny_llama(V)
    dec = StepDecoder(model, eos_ids=[2], topk=5, capacity=2, column_chunk=CHUNK)
    per = dec.kv.bytes_per_column  # 2 (k, v) x 2 layers x 2 slots x 2 heads x 8 dims x 4 bytes
    assert per == 2 * 2 * 2 * 2 * 8 * 4
    import tamperbench.models.memory as memory

    monkeypatch.setattr(memory, "free_bytes", lambda device: 4 * 100 * per)
    assert dec.reserve_columns(100)  # exactly a quarter: taken
    assert not dec.reserve_columns(101)  # one column more: refused, nothing allocated
    assert dec.kv.columns == 100 and dec.kv.reallocations == 1
