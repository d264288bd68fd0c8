"""Prefix-shared prefill on the real embedded model: greedy answers are token for token those of
every prompt prefilled alone, and the shared prefix is fed once (counted by the admitter)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.model

DOC = ("The harbour office opens at seven. Boats must register before noon. "
       "Fuel is sold at the north pier only, and the cafe closes when the last ferry leaves.")
QUESTIONS = ["When does the office open?", "Where is fuel sold?", "When does the cafe close?",
             "Quote the second sentence."]


def _convs():
    return [[{"role": "user", "content": f"Read this.\n\n{DOC}\n\n{q}"}] for q in QUESTIONS]


@pytest.mark.parametrize("batch", [8, 2])  # 2: the group waits with its prefix for free slots
def test_shared_prefill_matches_alone(embedded_backend, batch):
    be = embedded_backend
    old = be.max_batch_size
    be.max_batch_size = batch
    try:
        alone = be.generate_chat(_convs(), max_new_tokens=6, progress=False, share_prefix=False)
        s_alone = dict(be.generation_stats)
        shared = be.generate_chat(_convs(), max_new_tokens=6, progress=False)
        s_shared = dict(be.generation_stats)
    finally:
        be.max_batch_size = old
    assert [g.token_ids for g in shared] == [g.token_ids for g in alone]
    assert [g.text for g in shared] == [g.text for g in alone]
    assert [g.prompt_ids for g in shared] == [g.prompt_ids for g in alone]
    # hand count: the shared prefix is the common token prefix of the four prompts
    ids = [g.prompt_ids for g in alone]
    p = min(next((k for k, (x, y) in enumerate(zip(ids[0], q)) if x != y), len(q)) for q in ids[1:])
    assert p > 40  # system prompt + document
    assert s_alone["prefill_tokens"] == sum(map(len, ids)) == s_shared["prefill_tokens_alone"]
    assert s_shared["prefill_tokens"] == p + sum(len(q) - p for q in ids)
    assert s_shared["shared_groups"] == 1 and s_alone["shared_groups"] == 0


def test_shared_prefill_with_a_prompt_of_its_own(embedded_backend):
    """A prompt sharing nothing beyond the system prompt is prefilled alone, in the same call."""
    convs = _convs()[:2] + [[{"role": "user", "content": "Name a colour."}]]
    alone = embedded_backend.generate_chat(convs, max_new_tokens=5, progress=False, share_prefix=False)
    shared = embedded_backend.generate_chat(convs, max_new_tokens=5, progress=False)
    assert [g.token_ids for g in shared] == [g.token_ids for g in alone]
    assert embedded_backend.generation_stats["prefill_tokens"] < sum(len(g.prompt_ids) for g in alone)
