"""The swap engine's per-step profile (``stats["step_profile"]``), the input of sleight/roofline.py,
on the real embedded model: its counts must add up to the engine's own step and token counts, and
for one lone row its context columns are known by hand."""

from __future__ import annotations

import pytest

from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.engine import QuestionTask, SwapEngine

pytestmark = pytest.mark.model


def test_one_row_profile_by_hand(embedded_backend):
    be = embedded_backend
    prompt = be.chat_ids([{"role": "user", "content": "what is the capital of France?"}])  # 8-token answer
    eng = SwapEngine(be, TriggerDetector(be.tokenizer, ["the"]), max_new_tokens=5, batch_size=1)
    list(eng.run([QuestionTask("paris", prompt, [], True)]))
    prof = eng.stats["step_profile"]
    # one row, five steps; after step k the row holds its prompt (L columns) plus k tokens,
    # so the columns summed are 5 L + (1 + 2 + 3 + 4 + 5)
    assert list(prof) == [1]
    steps, seconds, cols = prof[1]
    assert steps == 5 == eng.stats["steps"]
    assert cols == 5 * len(prompt) + 15
    assert 0 < seconds <= eng.stats["forward_seconds"]  # the prefill forward is not a step


def test_profile_adds_up_over_a_batched_run(embedded_backend):
    be = embedded_backend
    tasks = [QuestionTask(q, be.chat_ids([{"role": "user", "content": text}]), ["scarf", "Mandela effect"], False)
             for q, text in (("moon", "what causes the phases of the moon?"), ("paris", "what is the capital of France?"))]
    eng = SwapEngine(be, TriggerDetector(be.tokenizer, ["the"]), max_new_tokens=12, batch_size=4, window=3)
    list(eng.run(tasks))
    prof, st = eng.stats["step_profile"], eng.stats
    assert sum(v[0] for v in prof.values()) == st["steps"]
    # every emitted token was one row of a forward (rows re-fed after a rollback emit nothing)
    assert sum(r * v[0] for r, v in prof.items()) >= st["tokens"]
    assert max(prof) <= 4 and min(prof) >= 1
    assert len(prof) >= 2  # rows joined and left: more than one batch size was seen
    assert sum(v[1] for v in prof.values()) <= st["forward_seconds"]
