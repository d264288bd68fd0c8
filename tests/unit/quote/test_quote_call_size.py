"""runner.call_size: how many trials a generation call packs and whether its rows come from memory.

Why: the load-time batch size (64 on CPU) cut the ``standard`` preset's 74 trials into calls of 58
and 16, and the second call paid ~96 more steps' fixed cost for 16 rows. Without ``--batch-size``
a local backend packs documents into calls of up to MAX_CALL_BATCHES load-time batches and decodes
a call's rows as memory allows; an explicit ``--batch-size`` stays the cap; a remote backend keeps
plain calls of its batch size. Numbers by hand from the manifest (10 documents, 74 trials).
"""

from __future__ import annotations

from types import SimpleNamespace

from tamperbench.quote.runner import MAX_CALL_BATCHES, QuoteRunSpec, build_trials, call_size, generation_calls


class _Local(SimpleNamespace):
    def prefix_memory(self):  # what marks a backend that prefills a shared prefix once
        raise AssertionError("not called")

    def rows_from_memory(self):  # the MemoryRowsBackend capability (models/protocols.py)
        raise AssertionError("not called")


def _standard():
    return sorted(build_trials(QuoteRunSpec(preset="standard")), key=lambda t: t.prompt)


def test_local_backend_without_batch_size_is_one_call_of_the_standard_preset():
    assert MAX_CALL_BATCHES == 4
    assert call_size(_Local(max_batch_size=64), None) == (256, True, True)  # 4 x 64 trials, rows by memory
    bs, keep, _ = call_size(_Local(max_batch_size=64), None)
    assert [len(c) for c in generation_calls(_standard(), bs, keep_documents=keep)] == [74]
    # the load-time cut: documents of 6 or 8 trials packed up to 64, then the rest
    assert [len(c) for c in generation_calls(_standard(), 64)] == [58, 16]


def test_an_explicit_batch_size_stays_the_cap():
    assert call_size(_Local(max_batch_size=16), 16) == (16, True, False)
    assert call_size(_Local(max_batch_size=64), 64) == (64, True, False)


def test_a_remote_backend_keeps_calls_of_its_batch_size():
    assert call_size(SimpleNamespace(max_batch_size=8), None) == (8, False, False)
