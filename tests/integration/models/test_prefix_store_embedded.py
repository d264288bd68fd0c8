"""A second generation call that re-reads the first conversation (a judge's retry) starts from the
first call's KV inside ``prefix_memory``: same greedy tokens, and only the new tokens are prefilled."""

from __future__ import annotations

import pytest

from tamperbench.models.prefix_groups import common_prefix

pytestmark = pytest.mark.model

QUESTIONS = ["What colour is the sky on a clear day?", "Name one planet.", "What is two plus two?"]


def _first():
    return [[{"role": "user", "content": q}] for q in QUESTIONS]


def _retry(first_gens):
    return [conv + [{"role": "assistant", "content": g.text}, {"role": "user", "content": "Answer in one word."}]
            for conv, g in zip(_first(), first_gens)]


def test_retry_starts_from_the_first_calls_rows(embedded_backend):
    be = embedded_backend
    first_alone = be.generate_chat(_first(), max_new_tokens=6, progress=False, share_prefix=False)
    retry_alone = be.generate_chat(_retry(first_alone), max_new_tokens=5, progress=False, share_prefix=False)
    with be.prefix_memory() as store:
        first = be.generate_chat(_first(), max_new_tokens=6, progress=False)
        assert len(store.ids) == 3  # each finished row: prompt + answer
        retry = be.generate_chat(_retry(first), max_new_tokens=5, progress=False)
        fed = be.generation_stats["prefill_tokens"]
    assert be._prefix_store is None  # scoped to the block
    assert [g.token_ids for g in first] == [g.token_ids for g in first_alone]
    assert [g.token_ids for g in retry] == [g.token_ids for g in retry_alone]
    # hand count: each retry prompt feeds only what follows the longest prefix it shares with its own
    # first row (prompt + generated ids, EOS included), never its last token
    rows = [f.prompt_ids + f.token_ids for f in first]
    reused = [min(max(common_prefix(r, g.prompt_ids) for r in rows), len(g.prompt_ids) - 1) for g in retry]
    assert all(c > len(f.prompt_ids) for c, f in zip(reused, first))  # the whole first prompt, at least
    assert fed == sum(len(g.prompt_ids) - c for g, c in zip(retry, reused))


def test_no_reuse_outside_the_block_or_without_sharing(embedded_backend):
    be = embedded_backend
    with be.prefix_memory() as store:
        first = be.generate_chat(_first(), max_new_tokens=4, progress=False, share_prefix=False)
        assert store.ids == []  # share_prefix=False: nothing kept, nothing reused
    be.generate_chat(_retry(first), max_new_tokens=3, progress=False)
    assert be.generation_stats["prefill_tokens"] > sum(len(g.prompt_ids) for g in first)
