"""Exact Words' plan and row-token model, registered in :mod:`tamperbench.suites` (``plan``,
``row_tokens``): what ``--dry-run`` prints and what the progress bar counts down from.

A work unit is one trial (quote/runner.py); every answer is counted to its budget."""

from __future__ import annotations

from tamperbench.estimate import Plan, open_read_only

__all__ = ["run_plan", "unit_row_tokens"]


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
    from tamperbench.quote.runner import build_trials, call_size, data_sha256, generation_calls
    from tamperbench.quote.runner import plan as quote_pending

    spec = spec.model_copy(update={"data_sha256": data_sha256()})  # as run_quote does: keys depend on it
    store = open_read_only(out)
    try:
        units = quote_pending(spec, store)
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
