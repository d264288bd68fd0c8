"""Exact Words' plan: the pending trials of a spec against a run's store (one work unit per trial), how
they are cut into generation calls, their row-token model (what the progress bar counts down from) and
the ``--dry-run`` plan (registered in :mod:`tamperbench.suites` as ``plan`` and ``row_tokens``).

Why trials keyed by their design: a long run on a slow model can be interrupted and resumed with the
same command; stored trials are skipped, and a generation call is committed whole or not at all."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from tamperbench.estimate import Plan, open_read_only
from tamperbench.models.protocols import MemoryRowsBackend
from tamperbench.quote.items import Item, build_prompt, document_for, load_items
from tamperbench.quote.spec import QuoteRunSpec, with_data_hash
from tamperbench.runs.units import WorkUnit
from tamperbench.store import trial_key

__all__ = ["MAX_CALL_BATCHES", "Trial", "build_trials", "call_size", "generation_calls", "pending", "run_plan",
           "trial_seed", "unit_row_tokens"]

TABLE = "quote_trials"


@dataclass
class Trial:
    key: str
    item: Item
    arm: str
    repeat: int
    prompt: str


def build_trials(spec: QuoteRunSpec) -> list[Trial]:
    trials = []
    for repeat in range(spec.repeats):
        for item in load_items(spec.preset):
            if spec.item_ids is not None and item.id not in spec.item_ids:
                continue
            for arm in spec.arms:
                seeded = {"sample_seed": "trial"} if spec.sample_seed == "trial" else {}  # keys of older runs kept
                key = trial_key({"suite": "quote", "model": spec.model, "preset": spec.preset,
                                 "item_id": item.id, "arm": arm, "repeat": repeat,
                                 "temperature": spec.temperature, "seed": spec.seed,
                                 "max_new_tokens": spec.max_new_tokens, "data": spec.data_sha256, **seeded})
                trials.append(Trial(key, item, arm, repeat, build_prompt(item, arm)))
    return trials


def trial_seed(spec: QuoteRunSpec, trial: Trial) -> int:
    """The seed a sampled trial's answer is drawn with under ``sample_seed="trial"``: a hash of the run's seed
    and the trial's item, arm and repeat (not the model: two models answer one trial from the same uniform draws,
    which narrows a comparison between them). 62 bits: torch's generator takes any non-negative 64-bit seed."""
    text = f"quote-sample\0{spec.seed}\0{trial.item.id}\0{trial.arm}\0{trial.repeat}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 2


def pending(spec: QuoteRunSpec, store) -> list[WorkUnit]:
    """Pending trials, sorted by prompt text so a document's items and both arms share a batch
    (its prefix is prefilled once: models/prefix_share.py); repeats stay apart (one seed each)."""
    done = store.keys(TABLE)
    todo = [t for t in build_trials(spec) if t.key not in done]
    todo.sort(key=lambda t: (t.repeat, t.prompt))
    return [WorkUnit(t.key, t) for t in todo]


MAX_CALL_BATCHES = 4  # a document's trials share one call up to this many batches


def call_size(backend, batch_size: int | None) -> tuple[int, bool, bool]:
    """(trials a generation call packs, keep a document's trials in one call, decode a call's rows as
    memory allows) for ``backend`` under the user's ``--batch-size`` (None: not given).

    Only a backend that prefills a shared prefix once gains from keeping a document's trials in one
    call; a remote one (each request alone) keeps calls of its batch size, so a server dying mid-run
    loses at most one call's answers (each call is one commit). A local one without ``--batch-size``
    packs documents into calls of up to ``MAX_CALL_BATCHES`` load-time batches and decodes each call's
    rows at once as far as memory allows (the ``MemoryRowsBackend`` capability, models/protocols.py): the ``standard``
    preset's 74 trials are one call of 74 rows, not 58 rows and then 16 (each wave pays every step's
    fixed cost). An explicit ``--batch-size`` stays the cap on both."""
    bs = max(1, int(backend.max_batch_size))
    keep = callable(getattr(backend, "prefix_memory", None))
    by_memory = keep and batch_size is None and isinstance(backend, MemoryRowsBackend)
    return (MAX_CALL_BATCHES * bs if by_memory else bs), keep, by_memory


def generation_calls(trials: list[Trial], bs: int, *, keep_documents: bool = True) -> list[list[Trial]]:
    """Cut trials (in plan order, a document's trials adjacent) into ``generate_chat`` calls of
    about ``bs`` trials that never split a document's trials.

    Why: each call prefills a shared prefix once (models/prefix_share.py), so a document cut in two
    is read twice: the ``depth`` preset's ~3,100-token fused document for its 74 trials in two
    calls of 64 and 10. A document's trials stay in one call up to ``MAX_CALL_BATCHES`` x ``bs``
    (each call is also one commit, so this bounds the work a crash can lose); within a call the
    rows decoded at once are what memory allows (models/memory.py). ``keep_documents=False``: plain
    calls of ``bs`` trials in plan order (backends that share no prefix)."""
    if not keep_documents:
        return [trials[i:i + bs] for i in range(0, len(trials), bs)]
    calls: list[list[Trial]] = []
    cur: list[Trial] = []
    for doc in _runs_by_document(trials):
        if cur and len(cur) + len(doc) > bs:
            calls.append(cur)
            cur = []
        for start in range(0, len(doc), MAX_CALL_BATCHES * bs):
            piece = doc[start:start + MAX_CALL_BATCHES * bs]
            if len(piece) == MAX_CALL_BATCHES * bs:
                calls.append(piece)
            else:
                cur.extend(piece)
    if cur:
        calls.append(cur)
    return calls


def _runs_by_document(trials: list[Trial]) -> list[list[Trial]]:
    runs: list[list[Trial]] = []
    for t in trials:
        doc = document_for(t.item).id
        if runs and document_for(runs[-1][-1].item).id == doc:
            runs[-1].append(t)
        else:
            runs.append([t])
    return runs


def unit_row_tokens(spec, unit) -> int:
    """Upper bound on the decoder's row-tokens for one pending trial: its answer to the budget."""
    del unit  # every trial has the same budget
    return int(spec.max_new_tokens)


def run_plan(spec, out, backend) -> Plan:
    """Pending Exact Words trials of ``spec`` against ``out``; prefill counts each shared prefix
    once per generation call, as ``generate_chat`` does (models/prefix_share.py). Under cascade
    attention ``generate_chat`` prefills a prefix tree (models/prefix_tree.py: the groups' common
    start once, each branch its members repeat once), so the plan counts the tree's tokens there
    and the one-level groups' elsewhere (the copy path, sliding-window models, remote backends)."""
    from tamperbench.models.decoding.cascade import cascade_mode
    from tamperbench.models.prefix_groups import plan_groups, prefill_cost
    from tamperbench.models.prefix_tree import tree_prefill_tokens
    spec = with_data_hash(spec)  # as the run does: keys depend on it
    store = open_read_only(out)
    try:
        units = pending(spec, store)
        total = len(build_trials(spec))
    finally:
        store.close()
    # the runner's own calls (quote/runner.py work): per repeat, cut by call_size/generation_calls
    bs, keep_documents, by_memory = call_size(backend, spec.batch_size)
    trials = [u.payload for u in units]
    calls = [call for repeat in sorted({t.repeat for t in trials})
             for call in generation_calls([t for t in trials if t.repeat == repeat], bs, keep_documents=keep_documents)]
    ids = {t.key: backend.chat_ids([{"role": "user", "content": t.prompt}]) for t in trials}
    model = getattr(backend, "model", None)
    cost = tree_prefill_tokens if model is not None and cascade_mode(model)[0] is not None else prefill_cost
    prefill = 0
    for call in calls:
        prompts = [ids[t.key] for t in call]
        prefill += cost(plan_groups(prompts), prompts)
    # rows decoded at once: a call's trials when memory decides (as far as it allows), else the cap
    batch = max(map(len, calls), default=1) if by_memory else min(bs, max(map(len, calls), default=1))
    notes = [f"prompt tokens without prefix reuse: {sum(map(len, ids.values())):,}",
             f"{len(calls)} generation call(s) of up to {bs} trials"
             + ("; each call's rows decoded at once as far as memory allows" if by_memory else "")]
    context = sum(map(len, ids.values())) // max(len(ids), 1) + spec.max_new_tokens // 2
    row_tokens = sum(unit_row_tokens(spec, u) for u in units)
    return Plan("quote", len(units), total - len(units), row_tokens, prefill, batch, notes=notes, context=context)
