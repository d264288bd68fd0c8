"""The quick preset's items can show task damage (Eq. 20): the embedded model's baseline task score is
above 0 on them. With four-option letters it answered "A." to every item ("A. Paris" for a B gold), so
task_correct was 0 in every condition, sham included, and damage could never show (audit, issue 26)."""

from __future__ import annotations

from tamperbench.owmi.run.spec import quick_items, score_task
from tamperbench.owmi.protocol.probes import system_prompt


def test_embedded_model_scores_above_zero_on_the_quick_items(embedded_backend):
    items = quick_items(1)
    gens = embedded_backend.generate_chat([[{"role": "user", "content": it.prompt_text()}] for it in items],
                                          max_new_tokens=12, system=system_prompt())
    scores = [score_task(it, g.text) for it, g in zip(items, gens)]
    assert sum(s > 0 for s in scores) >= 2, list(zip([g.text for g in gens], scores))
