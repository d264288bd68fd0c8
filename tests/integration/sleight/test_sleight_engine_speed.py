"""The swap engine's decoder sizing on the real embedded model, against the behaviour it keeps.

The engine now asks for no more slots than its tasks can fill (a prefix row per question, a row per
trial, and with matched branches up to ``window`` branch rows per trial) instead of the whole batch
size, and reserves the KV columns of its longest row once before the prefill. Both only change
how much memory is set up: every trace (tokens, log-probs, entropies, swaps, matched branches) and
the step count must be exactly those of a decoder given the whole batch size, as before; and the
buffers must not be reallocated inside the run.
"""

from __future__ import annotations

import pytest

from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.engine import QuestionTask, SwapEngine

pytestmark = pytest.mark.model

BUDGET, WINDOW, BATCH = 14, 3, 32
QUESTIONS = {
    "moon": "what causes the phases of the moon?",  # "The phases of the moon ..." -> a swap at token 0
    "week": "how many days are there in a week?",  # untouched
}
SUBS = ["scarf", "Mandela effect"]


def _run(be, matched: bool, force_capacity: int | None = None):
    tasks = [QuestionTask(q, be.chat_ids([{"role": "user", "content": text}]), SUBS, True)
             for q, text in QUESTIONS.items()]
    eng = SwapEngine(be, TriggerDetector(be.tokenizer, ["the"]), max_new_tokens=BUDGET, batch_size=BATCH,
                     window=WINDOW, matched_branches=matched)
    real, decs = be.step_decoder, []

    def capture(**kw):
        if force_capacity is not None:
            kw["capacity"] = force_capacity
        decs.append(real(**kw))
        return decs[-1]

    be.step_decoder = capture
    try:
        out = {r.question_id: r for r in eng.run(tasks)}
    finally:
        del be.step_decoder
    [dec] = decs
    return out, eng.stats, dec


def _trace(tr):
    return (tr.token_ids, tr.logprobs, tr.entropy_full, tr.entropy_top20, tr.injected, tr.finish_reason,
            tr.mentions, tr.spaceless,
            [(e.position, e.trigger, e.surface, e.n_injected, e.matched_clean_logprobs,
              e.matched_clean_entropy_full, e.matched_clean_entropy_top20) for e in tr.swaps])


def _all(res):
    return {(q, s): _trace(t) for q, r in res.items() for s, t in [("clean", r.clean), *r.trials.items()]}


@pytest.mark.parametrize("matched", [True, False])
def test_sized_decoder_decodes_exactly_as_the_whole_batch_and_never_regrows(embedded_backend, matched):
    be = embedded_backend
    got, st, dec = _run(be, matched)
    want, st_old, dec_old = _run(be, matched, force_capacity=BATCH)
    # by hand: 2 questions, 2 trials each, up to WINDOW branch rows per trial with matched branches
    assert dec.capacity == (2 + 4 * (1 + WINDOW) if matched else 2 + 4) and dec_old.capacity == BATCH
    assert _all(got) == _all(want)  # exact floats, matched-branch lists included
    assert (st["steps"], st["tokens"], st["swaps"]) == (st_old["steps"], st_old["tokens"], st_old["swaps"])
    assert st["swaps"] >= 3  # first and later swaps really happened
    assert dec.kv.reallocations == dec_old.kv.reallocations == 1  # the reservation, never grown after
    longest = max(len(be.chat_ids([{"role": "user", "content": t}])) for t in QUESTIONS.values())
    assert dec.kv.columns == longest + BUDGET + dec.kv.column_chunk >= dec.n  # reserved up front
