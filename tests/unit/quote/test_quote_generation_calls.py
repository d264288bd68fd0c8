"""generation_calls: a document's trials share one generate_chat call (its prefix is read once)."""

from __future__ import annotations

from tamperbench.quote.runner import QuoteRunSpec, build_trials, generation_calls


def _doc(t):
    return "fused" if t.item.preset == "depth" else t.item.doc_id


def _planned(preset: str):
    return sorted(build_trials(QuoteRunSpec(preset=preset)), key=lambda t: t.prompt)


def test_depth_trials_are_one_call():
    trials = _planned("depth")
    assert len(trials) == 74  # 37 items x 2 arms, every prompt led by the same fused document
    calls = generation_calls(trials, 64)
    assert [len(c) for c in calls] == [74]  # not 64 + 10: the 3,100-token prefix is prefilled once


def test_standard_calls_never_split_a_document():
    trials = _planned("standard")
    calls = generation_calls(trials, 16)
    assert [t.key for c in calls for t in c] == [t.key for t in trials]  # same order, nothing lost
    seen: dict[str, int] = {}
    for n, call in enumerate(calls):
        for t in call:
            assert seen.setdefault(_doc(t), n) == n  # each document in exactly one call
    # by hand from the manifest: documents hold 6 or 8 trials (3 or 4 items x 2 arms), so a call
    # closes before a document would push it past 16
    sizes = [len(c) for c in calls]
    assert all(s <= 16 for s in sizes) and sum(sizes) == 74


def test_a_document_larger_than_the_call_limit_is_cut():
    trials = _planned("depth")
    calls = generation_calls(trials, 8)  # limit 4 x 8 = 32 trials a call
    assert [len(c) for c in calls] == [32, 32, 10]
    calls = generation_calls(trials, 1)
    assert max(len(c) for c in calls) == 4 and sum(len(c) for c in calls) == 74


def test_a_backend_without_shared_prefixes_gets_plain_calls_of_its_batch_size():
    # a remote backend (each request alone): a document's trials are not held together, so a server
    # dying mid-run loses at most one call of bs answers (tests/e2e/serve/test_serve_faults.py)
    trials = _planned("depth")
    calls = generation_calls(trials, 2, keep_documents=False)
    assert [len(c) for c in calls] == [2] * 37
    assert [t.key for c in calls for t in c] == [t.key for t in trials]
