"""Cascade attention on the real embedded model (SmolLM2-135M, llama): rows sharing a long prompt
prefix read it once a step, and their greedy answers are token for token those of every prompt
prefilled alone and those of the copy path (each row holding the prefix), with next-token log-probs
within float32 rounding of the copy path's."""

from __future__ import annotations

import pytest
import torch

from tamperbench.models.decoding import cascade as C
from tamperbench.models.prefix_share import PrefixAdmitter

pytestmark = pytest.mark.model

DOC = " ".join(f"Entry {i}: boat {i * 7 % 31} berths at pier {i % 5}." for i in range(8))
QUESTIONS = ["Which pier?", "Quote entry 3 exactly, word for word, please.", "Hi"]


def _convs():
    return [[{"role": "user", "content": f"Read this.\n\n{DOC}\n\n{q}"}] for q in QUESTIONS]


def _generate(be, monkeypatch, mode, batch, share=True):
    monkeypatch.setenv(C.ENV, mode)
    old = be.max_batch_size
    be.max_batch_size = batch
    try:
        out = be.generate_chat(_convs(), max_new_tokens=5, progress=False, share_prefix=share)
    finally:
        be.max_batch_size = old
    return [g.token_ids for g in out], dict(be.generation_stats), out


def test_cascade_answers_equal_alone_and_copy(embedded_backend, monkeypatch):
    be = embedded_backend
    alone, _, gens = _generate(be, monkeypatch, "cascade", 8, share=False)
    assert min(len(g.prompt_ids) for g in gens) > 130  # a long shared prefix: system prompt + document
    cascade, stats, _ = _generate(be, monkeypatch, "cascade", 8)
    assert stats["shared_prefix_attention"] == C.MODE == "cascade-tree" and stats["cascade_rows"] == 3
    assert stats["cascade_steps"] == 5 and stats["cascade_groups"] == 1
    waiting, wstats, _ = _generate(be, monkeypatch, "cascade", 2)  # the group waits with its prefix for a slot
    assert wstats["cascade_rows"] == 3 and wstats["batch_rows"] == 2
    copy, cstats, _ = _generate(be, monkeypatch, "copy", 8)
    assert cstats["shared_prefix_attention"] == "copy" and cstats["cascade_rows"] == 0
    assert cascade == alone and waiting == alone and copy == alone


def test_next_token_logprobs_within_float32_rounding(embedded_backend, monkeypatch):
    prompts = [embedded_backend.chat_ids(c) for c in _convs()]
    seen = {}
    for mode in ("cascade", "copy"):
        monkeypatch.setenv(C.ENV, mode)
        dec = embedded_backend.step_decoder(capacity=3)
        order = sorted(PrefixAdmitter(dec, prompts).admit(3), key=lambda t: t[1])
        rids = [r for r, _ in order]
        lps = []
        for _ in range(3):
            dec.step()
            lps.append(dec.pending_logprobs(rids).clone())
        seen[mode] = torch.stack(lps)
        assert (dec.cascade_steps == 3) == (mode == "cascade")
    diff = (seen["cascade"] - seen["copy"]).abs()
    assert diff.max().item() < 2e-3  # float32 rounding of a split softmax (not bitwise SDPA)
    assert diff.max().item() > 0 or torch.equal(seen["cascade"], seen["copy"])


def test_provenance_names_the_attention_and_copy_keeps_old_ids(embedded_backend):
    prov = embedded_backend.provenance
    assert prov.shared_prefix_attention == C.MODE == "cascade-tree"
    off = prov.model_copy(update={"shared_prefix_attention": None})
    assert "shared_prefix_attention" not in off.model_dump(exclude_none=True)
    assert off.id != prov.id
