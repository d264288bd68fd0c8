"""The swap engine's slot count on the real embedded model: sized from the run's own prompts and
budget (models/memory.py ``slot_batch``), capped by an explicit batch size, named in the engine's
stats and in every record the runner stores, and without effect on the greedy tokens.

The free-memory reading is replaced by a fixed figure (``memory.free_bytes``): it is the one
machine-dependent input, and a figure where memory, not the work, decides makes the choice
checkable. The expected slots come from the footprint rule, whose arithmetic
tests/unit/models/test_memory_engine_batch.py checks by hand; the prompt length is measured here
from the chat template, independently of the engine.
"""

from __future__ import annotations

import pytest

from tamperbench.models import memory as M
from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.engine import QuestionTask, SwapEngine, choose_slots

pytestmark = pytest.mark.model

BUDGET, WINDOW = 8, 3
QUESTIONS = {"moon": "what causes the phases of the moon?", "paris": "what is the capital of France?"}
SUBS = ["scarf", "Mandela effect"]


def _free_for(model, rows: int, prompt_len: int, budget: int) -> int:
    """Free bytes at which exactly ``rows`` slots fit (half of free memory is the budget)."""
    return 2 * M.footprint(model, rows, prompt_len=prompt_len, new_tokens=budget, snapshot_len=prompt_len + budget)


def _run(be, tasks, **kw):
    eng = SwapEngine(be, TriggerDetector(be.tokenizer, ["the"]), max_new_tokens=BUDGET, window=WINDOW, **kw)
    out = {}
    for r in eng.run(tasks):
        out[(r.question_id, None)] = r.clean.token_ids
        out.update({(r.question_id, s): tr.token_ids for s, tr in r.trials.items()})
    return eng, out


def test_slots_follow_the_prompts_and_the_cap_and_leave_tokens_alone(embedded_backend, monkeypatch):
    be = embedded_backend
    prompts = {q: be.chat_ids([{"role": "user", "content": text}]) for q, text in QUESTIONS.items()}
    longest = len(prompts["moon"])
    tasks = [QuestionTask("moon", prompts["moon"], SUBS, True)]  # "The phases ...": a swap at token 0
    monkeypatch.setattr(M, "free_bytes", lambda device: _free_for(be.model, 3, longest, BUDGET))
    eng, got = _run(be, tasks)  # no batch size: memory decides
    st = eng.stats
    # a prefix row + 2 trials x (1 + 3 branch rows) = 9 rows the work can fill
    assert (st["batch_rows"], st["batch_by"], st["batch_cap"], st["batch_limit"]) == (3, "memory", None, 9)
    assert (st["batch_prompt_len"], st["batch_new_tokens"]) == (longest, BUDGET)
    assert eng.batch is not None and eng.batch.rows == 3
    assert max(st["step_profile"]) == 3  # rows per forward: the slots were used, and never exceeded
    capped, ref = _run(be, tasks, batch_size=2)  # an explicit batch size below what fits wins
    assert (capped.stats["batch_rows"], capped.stats["batch_by"], capped.stats["batch_cap"]) == (2, "batch_size", 2)
    assert max(capped.stats["step_profile"]) == 2
    assert got == ref  # greedy tokens do not depend on the slots


def test_a_longer_prompt_gets_fewer_slots(embedded_backend, monkeypatch):
    """The sizing the engine runs (``choose_slots``, as ``run`` calls it), on the real model's shape
    and chat template, without decoding: the run above shows the engine uses it."""
    be = embedded_backend
    short = be.chat_ids([{"role": "user", "content": QUESTIONS["paris"]}])
    long = be.chat_ids([{"role": "user", "content": QUESTIONS["paris"] + " Answer in detail." * 60}])
    assert len(long) > 3 * len(short)
    monkeypatch.setattr(M, "free_bytes", lambda device: _free_for(be.model, 6, len(short), BUDGET))

    def slots(prompt, **kw):
        return choose_slots(be, [QuestionTask("paris", prompt, SUBS, True)], max_new_tokens=BUDGET, window=WINDOW, **kw)

    assert (slots(short).rows, slots(short).by, slots(short).prompt_len) == (6, "memory", len(short))
    got = slots(long)
    assert got.prompt_len == len(long) and got.by == "memory" and 1 <= got.rows < 6
    both = choose_slots(be, [QuestionTask("s", short, SUBS, True), QuestionTask("l", long, SUBS, True)],
                        max_new_tokens=BUDGET, window=WINDOW)
    assert (both.prompt_len, both.rows, both.limit) == (len(long), got.rows, 18)  # sized for the longest
    assert (slots(long, batch_size=1).rows, slots(long, batch_size=1).by) == (1, "batch_size")
    assert slots(short, matched_branches=False).limit == 3  # a prefix row and two trials


def test_the_runner_stores_the_slots_with_every_record(embedded_backend, monkeypatch, tmp_path):
    from tamperbench.sleight.spec import build_spec
    from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE
    from tamperbench.sleight.runner import run
    from tamperbench.store import RunStore

    be = embedded_backend
    spec = build_spec(model="embedded", preset="quick", questions=1, words=2, max_new_tokens=6, device="cpu")
    (_, question), = spec.questions
    longest = len(be.chat_ids([{"role": "user", "content": question}]))
    monkeypatch.setattr(M, "free_bytes", lambda device: _free_for(be.model, 2, longest, 6))
    run(spec, tmp_path / "run", backend=be)
    store = RunStore.open_existing(tmp_path / "run", read_only=True)
    try:
        rows = store.rows(CLEAN_TABLE) + store.rows(TRIALS_TABLE)
    finally:
        store.close()
    assert len(rows) == 3  # the clean answer and two trials
    assert {(r["batch_rows"], r["batch_by"]) for r in rows} == {(2, "memory")}
