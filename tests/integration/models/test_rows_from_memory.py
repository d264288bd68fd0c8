"""The MemoryRowsBackend capability (HFBackend.rows_from_memory) on the real embedded model: a call decodes all its prompts at
once when memory allows, not at most the backend's load-time batch size, and the greedy answers are
those of the capped call (rows never change greedy tokens). 5 prompts, cap 2: by hand, 5 rows
inside the block (5 prompts of ~40 tokens need a few MB each, far below free memory), 2 outside."""

from __future__ import annotations

import pytest

from tamperbench.models.protocols import Capability, MemoryRowsBackend, capabilities

pytestmark = pytest.mark.model

QUESTIONS = ["Name a fruit.", "Count to three.", "What is 2 + 2?", "Say hi.", "Name a colour."]


def test_rows_come_from_memory_inside_the_block_only(embedded_backend):
    be = embedded_backend
    convs = [[{"role": "user", "content": q}] for q in QUESTIONS]
    old = be.max_batch_size
    be.max_batch_size = 2
    try:
        capped = be.generate_chat(convs, max_new_tokens=4, progress=False)
        assert be.generation_stats["batch_rows"] == 2
        assert isinstance(be, MemoryRowsBackend) and Capability.MEMORY_ROWS in capabilities(be)
        with be.rows_from_memory():
            wide = be.generate_chat(convs, max_new_tokens=4, progress=False)
            assert be.generation_stats["batch_rows"] == 5
        again = be.generate_chat(convs, max_new_tokens=4, progress=False)
        assert be.generation_stats["batch_rows"] == 2  # the block restores the cap
    finally:
        be.max_batch_size = old
    assert [g.token_ids for g in wide] == [g.token_ids for g in capped] == [g.token_ids for g in again]
