"""Sleight of Word's plan: the pending work units of a spec against a run's store, their row-token
model (what the progress bar counts down from) and the ``--dry-run`` plan (registered in
:mod:`tamperbench.suites` as ``plan`` and ``row_tokens``).

Why a question is the unit of work: the engine finishes a question (clean run + every substitution)
together, and its rows are committed as soon as it finishes, so an interrupted run loses at most the
questions in flight and resumes by skipping stored trial keys. The unit's payload is plain data, so an
executor in another process can take the work."""

from __future__ import annotations

from dataclasses import dataclass

from tamperbench.estimate import Plan, open_read_only
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE, clean_key, trial_record_key
from tamperbench.runs.units import WorkUnit

__all__ = ["QuestionWork", "pending", "run_plan", "unit_row_tokens"]


@dataclass(frozen=True)
class QuestionWork:
    """A work unit's payload: one question's pending trials (picklable, for any executor)."""

    question_id: str
    question: str
    clean_key: str
    substitutions: tuple[str, ...]
    need_clean: bool
    clean_ids: tuple[int, ...] = ()  # the stored clean answer, when only trials are pending


def pending(spec, store, pid: str) -> tuple[list[WorkUnit], int, int]:
    """Pending questions as work units (a question with nothing pending is skipped), trials in
    the spec and trials already stored."""
    have_trials, have_clean = store.keys(TRIALS_TABLE), store.keys(CLEAN_TABLE)
    units, total, skipped = [], 0, 0
    for qid, question in spec.questions:
        ckey = clean_key(pid, qid, question, spec)
        todo = []
        for sub in spec.substitutions:
            total += 1
            if trial_record_key(pid, qid, question, sub, spec) in have_trials:
                skipped += 1
            else:
                todo.append(sub)
        need_clean = ckey not in have_clean
        if not todo and not need_clean:
            continue
        clean_ids: tuple[int, ...] = ()
        if todo and not need_clean:
            rows = store.rows(CLEAN_TABLE, "WHERE key = ?", [ckey])
            clean_ids = tuple(rows[0]["token_ids"]) if rows else ()
        units.append(WorkUnit(ckey, QuestionWork(qid, question, ckey, tuple(todo), need_clean, clean_ids)))
    return units, total, skipped


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
    store = open_read_only(out)
    try:
        units, total, skipped = pending(spec, store, backend.provenance_id)
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
