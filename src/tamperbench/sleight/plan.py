"""Sleight of Word's plan and row-token model, registered in :mod:`tamperbench.suites` (``plan``,
``row_tokens``): what ``--dry-run`` prints and what the progress bar counts down from.

A work unit is one question (its clean prefix row and its pending trials, sleight/runner.py)."""

from __future__ import annotations

from tamperbench.estimate import Plan, open_read_only

__all__ = ["run_plan", "unit_row_tokens"]


def unit_row_tokens(spec, unit) -> int:
    """Upper bound on the swap engine's row-tokens for one pending question unit: its prefix row
    (the clean answer) and each pending trial run to the budget. The plan and the runner's
    progress bar both count with this."""
    return spec.max_new_tokens * (len(unit.payload.substitutions) + 1)


def run_plan(spec, out, backend) -> Plan:
    """Pending Sleight of Word work of ``spec`` against run directory ``out`` (nothing written).

    Row-tokens: per pending question its prefix row (the clean answer) to the budget, plus every
    pending trial to the budget; matched-branch rows of later swaps (``window`` tokens each) are
    not counted. Prefill: one prompt per pending question (trials fork from it)."""
    from tamperbench.sleight.runner import plan as sleight_pending

    store = open_read_only(out)
    try:
        units, total, skipped = sleight_pending(spec, store, backend.provenance_id)
    finally:
        store.close()
    msgs = {qid: [{"role": "user", "content": q}] for qid, q in spec.questions}
    n_trials = sum(len(u.payload.substitutions) for u in units)
    row_tokens = sum(unit_row_tokens(spec, u) for u in units)
    prefill = sum(len(backend.chat_ids(msgs[u.payload.question_id])) for u in units)
    batch = _slots(spec, units, msgs, backend)
    notes = [f"{len(spec.questions)} questions x {len(spec.substitutions)} substitutions x "
             f"{spec.max_new_tokens} tokens; {len(units)} questions pending",
             f"matched-branch rows ({spec.window} tokens at each later swap) are not counted"]
    context = prefill // max(len(units), 1) + spec.max_new_tokens // 2
    return Plan("sleight", n_trials, skipped, row_tokens, prefill, batch, notes=notes, context=context)


def _slots(spec, units, msgs, backend) -> int:
    """The rows the swap engine will decode at once: its own ``choose_slots`` over the pending
    questions (memory for the longest prompt + budget, the rows they fill, the device ceiling or
    ``--batch-size``); the spec's or load-time batch where there is no local model to size."""
    from tamperbench.models.protocols import StepBackend

    steps = isinstance(backend, StepBackend)  # (a flag, not a narrowing: the backend also chats)
    if not units or not steps:  # the black-box engine: no slots to size
        return int(spec.batch_size or backend.max_batch_size)
    from tamperbench.sleight.engine import QuestionTask, choose_slots

    tasks = [QuestionTask(question_id=u.payload.question_id, prompt_ids=backend.chat_ids(msgs[u.payload.question_id]),
                          substitutions=list(u.payload.substitutions), need_clean=u.payload.need_clean) for u in units]
    return choose_slots(backend, tasks, max_new_tokens=spec.max_new_tokens, window=spec.window,
                        batch_size=spec.batch_size).rows
