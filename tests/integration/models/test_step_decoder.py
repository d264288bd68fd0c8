"""The step decoder against two independent references on the real embedded model:

* a no-cache reference: one full forward pass over the whole context per token, no padding;
* transformers' own ``generate`` (greedy, left-padded batch).

A token may differ from the reference only where the reference's top-2 log-probs are within
1e-4 (a float near-tie); the tests assert that and that such steps are rare.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.model

QUESTIONS = [
    "what is the capital of France?",
    "what causes the phases of the moon?",
    "Name three colors.",
    "why is the sky blue?",
]
TIE = 1e-4


@torch.inference_mode()
def ref_dist(model, ctx: list[int]) -> torch.Tensor:
    logits = model(input_ids=torch.tensor([ctx])).logits[0, -1]
    return torch.log_softmax(logits.float(), -1)


def ref_check(model, prompt: list[int], emitted: list[int], forced: set[int] = frozenset(),
              logprobs: list[float] | None = None) -> int:
    """Teacher-force ``prompt + emitted`` through one no-cache, unpadded forward pass (causal
    attention makes position i's logits exactly those of a full forward over the first i tokens).
    Every non-forced token must be the reference arg-max or a near-tie; log-probs must agree.
    Returns the number of near-tie mismatches."""
    ties = 0
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([list(prompt) + list(emitted)])).logits[0]
    lps = torch.log_softmax(logits[len(prompt) - 1: -1].float(), -1)
    for i, tok in enumerate(emitted):
        lp = lps[i]
        if i not in forced:
            best = int(lp.argmax())
            if best != tok:
                top2 = lp.topk(2).values
                assert float(top2[0] - top2[1]) < TIE, f"step {i}: {tok} vs reference {best}"
                assert float(lp[best] - lp[tok]) < TIE
                ties += 1
        if logprobs is not None:
            assert abs(float(lp[tok]) - logprobs[i]) < 1e-3, f"step {i} log-prob"
    return ties


def prompts_of(backend, qs=QUESTIONS):
    return [backend.chat_ids([{"role": "user", "content": q}]) for q in qs]


def decode(dec, rids, steps, force_at=None):
    """Greedy ``steps`` steps for rows; force_at: {(rid, step): token}."""
    out = {r: [] for r in rids}
    stats = {r: [] for r in rids}
    for t in range(steps):
        force = {r: tok for (r, s), tok in (force_at or {}).items() if s == t and r in rids}
        for res in dec.step(force):
            if res.row in out:
                out[res.row].append(res.token)
                stats[res.row].append(res)
    return out, stats


def test_batched_rows_match_nocache_reference(embedded_backend):
    be = embedded_backend
    prompts = prompts_of(be)
    dec = be.step_decoder(capacity=4)
    rids = dec.add_rows(prompts)
    out, stats = decode(dec, rids, 12)
    ties = 0
    for r, p in zip(rids, prompts):
        ties += ref_check(be.model, p, out[r], logprobs=[s.logprob for s in stats[r]])
        # entropy and top-k are those of the same float32 distribution
        s0 = stats[r][0]
        lp = ref_dist(be.model, p)
        p_ = lp.exp()
        assert abs(s0.entropy - float(-(p_ * lp).sum())) < 1e-3
        assert s0.topk_ids[0] == s0.token and len(s0.topk_ids) == 20
        assert s0.topk_logprobs == sorted(s0.topk_logprobs, reverse=True)
    assert ties <= 1


def test_matches_transformers_generate(embedded_backend):
    be = embedded_backend
    prompts = prompts_of(be)
    n_new = 16
    dec = be.step_decoder(capacity=4)
    rids = dec.add_rows(prompts)
    out, _ = decode(dec, rids, n_new)
    L = max(map(len, prompts))
    pad = be.pad_id
    ids = torch.tensor([[pad] * (L - len(p)) + p for p in prompts])
    am = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in prompts])
    with torch.inference_mode():
        gen = be.model.generate(input_ids=ids, attention_mask=am, max_new_tokens=n_new, do_sample=False)
    for i, r in enumerate(rids):
        ref = gen[i, L:].tolist()
        ours = out[r]
        if be.eos_ids[0] in ref:  # generate pads after EOS; we keep decoding
            k = ref.index(be.eos_ids[0]) + 1
            ref, ours = ref[:k], ours[:k]
        assert ours == ref


def test_forced_tokens_fork_and_rollback(embedded_backend):
    be = embedded_backend
    model = be.model
    [p] = prompts_of(be, ["what causes the phases of the moon?"])
    dec = be.step_decoder(capacity=4)
    [a] = dec.add_rows([p])
    base, _ = decode(dec, [a], 5)
    # fork into two children that diverge by forcing different tokens
    b, c = dec.fork(a, 2)
    tok_b, tok_c = 2784, 1345  # two ordinary word pieces; the test only needs them to differ
    out, stats = decode(dec, [a, b, c], 6, force_at={(b, 0): tok_b, (c, 0): tok_c})
    assert stats[b][0].forced and not stats[a][0].forced
    ref_check(model, p, base[a] + out[a])
    ref_check(model, p, base[a] + out[b], forced={5})
    ref_check(model, p, base[a] + out[c], forced={5})
    # the forced token's log-prob is the model's log-prob of it at that position
    lp = ref_dist(model, p + base[a])
    assert abs(stats[b][0].logprob - float(lp[tok_b])) < 1e-3
    assert stats[a][0].token == out[a][0]

    # one-token rollback restores the previous distribution: the same greedy token comes back
    before = dec.generated(a)
    dec.rollback(a, 1)
    assert dec.generated(a) == before[:-1]
    assert dec.next_greedy(a) == before[-1]
    # force something else instead, then continue; must equal the reference on that context
    [res] = [r for r in dec.step({a: tok_b}) if r.row == a]
    cont, _ = decode(dec, [a], 4)
    ref_check(model, p, before[:-1] + [tok_b] + cont[a], forced={len(before) - 1})

    # deep rollback (3 tokens) re-feeds silently, then continues exactly like the reference
    full = dec.generated(c)
    dec.rollback(c, 3)
    assert dec.generated(c) == full[:-3]
    out2, _ = decode(dec, [c], 4)
    ref_check(model, p, full[:-3] + out2[c], forced={5})


def test_released_slots_are_reused_and_compacted(embedded_backend):
    be = embedded_backend
    prompts = prompts_of(be)
    dec = be.step_decoder(capacity=2)
    r0, r1 = dec.add_rows(prompts[:2])
    decode(dec, [r0, r1], 3)
    dec.release([r0])
    assert dec.free_slots == 1
    [r2] = dec.add_rows([prompts[2]])  # goes into r0's dead slot, left-padded to the current end
    out, _ = decode(dec, [r1, r2], 6)
    ref_check(be.model, prompts[2], out[r2])
    dec.release([r2])
    out3, _ = decode(dec, [r1], 3)  # compaction happens here (half the slots are dead)
    assert dec.b == 1
    ref_check(be.model, prompts[1], dec.generated(r1))
    with pytest.raises(ValueError):
        dec.add_rows(prompts[:3])


def test_score_streams_the_same_logprobs(embedded_backend):
    be = embedded_backend
    [p] = prompts_of(be, ["why is the sky blue?"])
    dec = be.step_decoder(capacity=1)
    [r] = dec.add_rows([p])
    _, stats = decode(dec, [r], 10)
    cont = [s.token for s in stats[r]]
    for chunk in (3, 128):  # several chunks through the cache, and one
        got = be.score(p, cont, chunk_size=chunk)
        assert got == pytest.approx([s.logprob for s in stats[r]], abs=1e-3)


def test_generate_chat_greedy_stop_and_seeded_sampling(embedded_backend):
    be = embedded_backend
    convs = [[{"role": "user", "content": q}] for q in QUESTIONS[:2]]
    greedy = be.generate_chat(convs, max_new_tokens=12, progress=False)
    assert greedy[0].text == "The capital of France is Paris." and greedy[0].finish_reason == "eos"
    assert greedy[0].prompt_text == be.chat_text(convs[0])
    assert greedy[0].prompt_ids == be.chat_ids(convs[0])
    assert greedy[1].finish_reason == "length" and len(greedy[1].token_ids) == 12
    stopped = be.generate_chat(convs[:1], max_new_tokens=12, stop=[" of"], progress=False)[0]
    assert stopped.text == "The capital" and stopped.finish_reason == "stop"
    # a sampled answer depends on (seed, index), not on the batch it shared
    a = be.generate_chat(convs, max_new_tokens=8, temperature=0.9, seed=3, progress=False)
    old = be.max_batch_size
    try:
        be.max_batch_size = 1
        b = be.generate_chat(convs, max_new_tokens=8, temperature=0.9, seed=3, progress=False)
    finally:
        be.max_batch_size = old
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    c = be.generate_chat(convs, max_new_tokens=8, temperature=0.9, seed=4, progress=False)
    assert [g.token_ids for g in c] != [g.token_ids for g in a]
