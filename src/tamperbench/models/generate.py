"""Plain batched generation (greedy or seeded sampling, stop strings) on the step decoder.

Why not ``model.generate``: continuous batching (a finished row's slot is refilled at once) and
per-conversation random generators, so a sampled answer depends on its seed only (a caller's own seed
per prompt, or (seed, index in the call)) and not on the batch size or on its neighbours in the batch.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch

from tamperbench.models.protocols import GenerationProgress, ProgressListener


def _sample(logp: torch.Tensor, temperature: float, gens: list[torch.Generator]) -> list[int]:
    """Inverse-CDF sampling with one uniform draw per row from that row's own generator."""
    probs = torch.softmax(logp / temperature, dim=-1)
    cdf = probs.cumsum(-1)
    u = torch.tensor([torch.rand((), generator=g).item() for g in gens], device=logp.device)
    u = u * cdf[:, -1]
    idx = torch.searchsorted(cdf, u[:, None])[:, 0]
    return idx.clamp(max=logp.shape[1] - 1).tolist()


def _cut_stop(text: str, stops: Sequence[str]) -> int | None:
    hits = [text.find(s) for s in stops if s in text]
    return min(hits) if hits else None


def row_seeds(seed: int | Sequence[int], n: int) -> list[int]:
    """Each prompt's sampling seed: ``seed`` itself when it is a sequence (one per prompt, the caller's:
    Exact Words seeds each trial by its identity), else (seed, index in the call)."""
    if isinstance(seed, numbers.Integral):
        return [int(seed) * 1_000_003 + i for i in range(n)]
    seeds = [int(x) for x in seed]
    if len(seeds) != n:
        raise ValueError(f"{len(seeds)} seeds for {n} prompts")
    return seeds


def run_generation(backend, prompts: list[list[int]], *, max_new_tokens: int, temperature: float,
                   seed: int | Sequence[int],
                   stops: list[str], progress: ProgressListener | None = None, share_prefix: bool = True,
                   prefix_store=None, grammars: Sequence | None = None) -> list[tuple[list[int], str, str]]:
    """Returns (new token ids, text, finish_reason) per prompt, in prompt order.

    ``progress``: called with a :class:`GenerationProgress` after every decoding step (the caller draws
    any bar; this layer knows nothing of the terminal).
    ``share_prefix``: prefill each shared prompt prefix once (models/prefix_share.py). Where the
    time went (prefill vs decode tokens and seconds) is left in ``backend.generation_stats``.
    ``prefix_store``: a ``prefix_share.PrefixStore`` whose rows later calls may start from (filled
    with this call's prompts + answers as they finish). ``grammars``: per prompt a
    ``decoding.grammar.JsonGrammar`` to decode its answer under, or None (free)."""
    from tamperbench.models.memory import generation_batch
    from tamperbench.models.prefix_share import PrefixAdmitter

    from tamperbench.models.decoding.cascade import cascade_mode

    queue = PrefixAdmitter(None, prompts, share=share_prefix, store=prefix_store)  # plans the groups
    # rows sized by this call's longest prompt (memory.py): a long-prompt batch is split, not crashed;
    # with cascade attention a row holds only its part after its group's prefix, the prefixes once
    private_len, shared_tokens, padded_tokens = None, 0, 0
    if share_prefix and cascade_mode(backend.model)[0] is not None:
        private_len, shared_tokens = queue.split_lengths()
        padded_tokens = queue.padded_tokens()
    cap = max(1, len(prompts))
    if not getattr(backend, "_rows_from_memory", False):  # see HFBackend.rows_from_memory
        cap = min(backend.max_batch_size, cap)
    rows = generation_batch(backend.model, backend.device, prompt_len=max(map(len, prompts), default=1),
                            new_tokens=max_new_tokens, cap=cap,
                            private_len=private_len, shared_tokens=shared_tokens, padded_tokens=padded_tokens)
    dec = queue.dec = backend.step_decoder(capacity=rows)
    dec.per_token_stats = False  # answers need each row's token (and log-probs to sample), no entropies
    row_of: dict[int, int] = {}  # row id -> prompt index
    gens: dict[int, torch.Generator] = {}
    seeds = row_seeds(seed, len(prompts))
    results: list[tuple[list[int], str, str] | None] = [None] * len(prompts)
    longest_stop = max((len(s) for s in stops), default=0)
    n_tokens = n_done = 0
    listen = progress if callable(progress) else None  # a caller's ``progress=False`` means no listener
    import time

    t0 = time.perf_counter()
    while queue.pending or row_of:
        if queue.pending and dec.free_slots:
            for rid, i in queue.admit(dec.free_slots):
                row_of[rid] = i
                if grammars is not None and grammars[i] is not None:
                    from tamperbench.models.decoding.grammar import matcher

                    dec.set_grammar(rid, matcher(backend.tokenizer, grammars[i], backend.eos_ids))
                if temperature > 0:
                    gens[rid] = torch.Generator().manual_seed(seeds[i])
        force = None
        if temperature > 0:
            rids = list(row_of)
            force = dict(zip(rids, _sample(dec.pending_logprobs(rids, constrained=grammars is not None), temperature, [gens[r] for r in rids])))
        finished = []
        for res in dec.step(force):
            n_tokens += 1
            ids = dec.generated(res.row)
            reason = None
            if res.is_eos:
                reason = "eos"
            elif stops:
                tail = backend.decode(ids[-(longest_stop + 8):])
                if _cut_stop(tail, stops) is not None:
                    reason = "stop"
            if reason is None and len(ids) >= max_new_tokens:
                reason = "length"
            if reason:
                finished.append((res.row, ids, reason))
        for rid, ids, reason in finished:
            i = row_of.pop(rid)
            gens.pop(rid, None)
            body = ids[:-1] if reason == "eos" else ids
            text = backend.decode(body)
            if stops:
                cut = _cut_stop(text, stops)
                if cut is not None:
                    text, reason = text[:cut], "stop"
            results[i] = (list(ids), text, reason)
            n_done += 1
        queue.remember([r for r, _, _ in finished])
        dec.release([r for r, _, _ in finished])
        if listen is not None:
            listen(GenerationProgress(n_done, len(prompts), n_tokens, time.perf_counter() - t0))
    wall = time.perf_counter() - t0
    backend.generation_stats = {
        "prompts": len(prompts), "prefill_tokens": queue.prefill_tokens,
        "prefill_tokens_alone": queue.prefill_tokens_alone, "prefill_seconds": queue.prefill_seconds,
        "decode_tokens": n_tokens, "decode_seconds": wall - queue.prefill_seconds, "seconds": wall,
        "shared_groups": sum(g.prefix > 0 for g in queue.groups), "batch_rows": rows,
        # which attention read the shared prefixes while decoding (decoding/cascade.py), and how much
        "shared_prefix_attention": dec.shared_prefix_attention or "copy", "cascade_rows": dec.cascade_rows,
        "cascade_groups": dec.kv.groups_registered, "cascade_steps": dec.cascade_steps,
        "per_token_stats": dec.per_token_stats}
    return results  # type: ignore[return-value]
