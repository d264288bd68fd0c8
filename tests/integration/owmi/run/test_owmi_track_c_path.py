"""Track C's execution path on the real embedded model: the targeted test the decay rule cites.

Why it exists: D.5 licenses a temporal-decay claim only for track pairs whose distinct execution
paths were *validated*, and Track C had only the batched-vs-reference equivalence test (which
shows two implementations agree, not that either asks the right thing at the right time). Here:
the task is answered under the hook, the reflection arrives as a later user turn after the
model's own answer, that turn carries no intervention cue and no introspective question, only
the task tokens are altered, and the rubric flag is a function of the reflection text alone.
One item, intervention and sham only, tiny token budgets: a few seconds once the model is loaded.
"""

from __future__ import annotations

import pytest

from tamperbench.owmi.protocol.probes import probe_text, rubric_flag
from tamperbench.owmi.run.spec import quick_spec

pytestmark = pytest.mark.model
CUES = ("unusual", "altered", "internal", "computation", "changed", "intervention", "detect", "json")


def test_track_c_reflects_in_a_later_turn_without_cue(embedded_backend, run_one_unit):
    spec = quick_spec(items_per_benchmark=1, probes=["detection"], tracks=["C"], conditions=["intervention", "sham"],
                      operators=[{"name": "noise", "dose": 4.0}], seeds=[0],  # no concept direction to build: faster
                      observer_classifier=False, task_max_new_tokens=4, reflection_max_new_tokens=4)
    _, _, _, rows = run_one_unit(embedded_backend, spec)  # the runner's batched engine on the session's model
    assert {(r["condition"], r["hook_scope"]) for r in rows} == {(c, s) for c in ("intervention", "sham")
                                                                  for s in ("active", "lifted")}
    reflection = probe_text("spontaneous", person="first", n_layers=embedded_backend.model.config.num_hidden_layers)
    assert not any(c in reflection.lower() for c in CUES)
    tok = embedded_backend.tokenizer
    for r in rows:
        assert r["track"] == "C" and r["probe_family"] == "spontaneous" and r["probe_text"] == reflection
        turns = r["prompt_text"].split("<|im_start|>user")
        assert len(turns) == 3, "task turn, then the reflection as a later user turn"
        assert r["task_output"] and r["task_output"].strip() in turns[1], "the model's own answer precedes it"
        assert reflection in turns[2] and not any(c in turns[2].lower() for c in CUES)
        assert r["rubric_flag"] is rubric_flag(r["response"]), "the rubric sees only the reflection text"
        if r["condition"] == "intervention":
            assert r["js_mean"] > 0
            altered = tok.decode([r["prompt_ids"][i] for i in r["intervened_positions"]])
            assert "capital of France" in altered and "reflect" not in altered, "only the task tokens are altered"
        else:
            assert r["intervened_positions"] == []
