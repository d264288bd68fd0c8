"""Forward passes over one sequence with an optional intervention: prefill, continue, greedy
decoding over a KV cache, and teacher-forced streaming of whole next-token distributions.

Why our own small loop (batch of one) rather than ``generate``: the hook's temporal scope needs
the engine to say, for every forward, whether it is the task prompt (``prefill``), a generated
task token (``decode``) or the probe (``probe``), and at which absolute position the forward
starts (``Intervention.offset``), so "lifted" means the probe is processed unaltered over the
perturbed cache. The same cache is cropped back and reused across the probe families of a
condition, so pairs sharing a prefix up to the intervened positions pay for it once.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from contextlib import nullcontext

import torch

from tamperbench.owmi.engine.operators import Intervention, Phase


def _cache_kw(model) -> str:
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def new_cache(model):
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def crop_to(cache, n: int) -> None:
    """Cut the cache back to its first ``n`` positions (transformers 5: crop(-tokens_to_remove))."""
    extra = cache.get_seq_length() - n
    if extra > 0:
        cache.crop(-extra)


def _hooks(model, iv: Intervention | None):
    if iv is None:
        return nullcontext()
    from tamperbench.models.hooks import hooks

    return hooks(model, iv.hook_pairs())


@torch.inference_mode()
def feed(model, cache, ids: Sequence[int], start: int, iv: Intervention | None, phase: Phase,
         logits_to_keep: int = 1, chunk: int = 512) -> torch.Tensor:
    """Feed ``ids`` (absolute positions start..) into ``cache``; returns the last
    ``logits_to_keep`` logits of the last chunk (float32)."""
    dev = next(model.parameters()).device
    kw = _cache_kw(model)
    logits = None
    with _hooks(model, iv):
        for lo in range(0, len(ids), chunk):
            part = list(ids[lo: lo + chunk])
            if iv is not None:
                iv.phase, iv.offset = phase, start + lo
            out = model(input_ids=torch.tensor([part], device=dev), use_cache=True,
                        logits_to_keep=min(logits_to_keep, len(part)), **{kw: cache})
            logits = out.logits[0].float()
    return logits


@torch.inference_mode()
def greedy(model, cache, last_logits: torch.Tensor, start: int, max_new: int, eos: set[int],
           iv: Intervention | None, phase: Phase, grammar=None) -> tuple[list[int], str]:
    """Greedy continuation from ``last_logits``; every new token is fed with ``phase``. ``grammar``:
    a fresh ``models.decoding.grammar.RowGrammar`` the tokens are chosen under (see
    ``ragged.Rows.greedy``), consumed as it goes."""
    from tamperbench.models.decoding.grammar import constrain

    out: list[int] = []
    logits = last_logits[-1]
    for k in range(max_new):
        if grammar is not None:
            logits = constrain(logits[None], [grammar])[0]
        tok = int(logits.argmax())
        out.append(tok)
        if grammar is not None:
            grammar.consume(tok)
        if tok in eos:
            return out, "eos"
        if k == max_new - 1:
            break
        logits = feed(model, cache, [tok], start + k, iv, phase)[-1]
    return out, "length"


class IvGroup:
    """Several row-targeted interventions driven as one (the conditions of an item as batch rows)."""

    def __init__(self, ivs: Sequence[Intervention | None]):
        self.ivs = [iv for iv in ivs if iv is not None]

    def __setattr__(self, name, value):
        if name in ("phase", "offset", "scope"):
            for iv in self.ivs:
                setattr(iv, name, value)
        object.__setattr__(self, name, value)

    def hook_pairs(self):
        return [p for iv in self.ivs for p in iv.hook_pairs()]


@torch.inference_mode()
def feed_rows(model, cache, ids: torch.Tensor, start: int, iv, phase: str) -> torch.Tensor:
    """Feed a (rows, n) block of ids; returns the last position's float32 logits (rows, V)."""
    if iv is not None:
        iv.phase, iv.offset = phase, start
    with _hooks(model, iv):
        out = model(input_ids=ids.to(next(model.parameters()).device), use_cache=True, logits_to_keep=1,
                    **{_cache_kw(model): cache})
    return out.logits[:, -1].float()


@torch.inference_mode()
def greedy_rows(model, cache, logits: torch.Tensor, start: int, max_new: int, eos: set[int], iv,
                phase: str, grammars: Sequence | None = None) -> list[tuple[list[int], str]]:
    """Greedy decoding of equal-length rows in lock step (no padding needed: every row has the
    same length at every step). A finished row keeps being fed but its tokens are not kept.
    ``grammars``: one fresh ``grammar.RowGrammar`` (or None) per row, as in :func:`greedy`."""
    rows = logits.shape[0]
    outs: list[list[int]] = [[] for _ in range(rows)]
    done = [False] * rows
    for k in range(max_new):
        if grammars is not None:
            from tamperbench.models.decoding.grammar import constrain

            logits = constrain(logits, [None if done[r] else grammars[r] for r in range(rows)])
        toks = logits.argmax(-1)
        for r in range(rows):
            if not done[r]:
                outs[r].append(int(toks[r]))
                if grammars is not None and grammars[r] is not None:
                    grammars[r].consume(int(toks[r]))
                done[r] = int(toks[r]) in eos
        if all(done) or k == max_new - 1:
            break
        logits = feed_rows(model, cache, toks[:, None], start + k, iv, phase)
    return [(o, "eos" if o and o[-1] in eos else "length") for o in outs]


@torch.inference_mode()
def distributions(model, ids: Sequence[int], start: int, iv: Intervention | None,
                  chunk: int = 128) -> Iterator[torch.Tensor]:
    """Teacher-forced float32 log-probs, chunk by chunk, of the token after each position
    >= ``start`` (``iv`` hooked as prefill at its declared positions). Only one chunk x vocab
    block is alive at a time: memory does not grow with length x vocabulary."""
    cache = new_cache(model)
    dev = next(model.parameters()).device
    kw = _cache_kw(model)
    for lo in range(0, len(ids), chunk):
        hi = min(lo + chunk, len(ids))
        if iv is not None:
            iv.phase, iv.offset = "prefill", lo
        keep = hi - max(start, lo)
        # hooks only around this forward: a baseline generator interleaved with this one
        # (js_divergence zips the two) must never run while the hook is installed
        with _hooks(model, iv):
            logits = model(input_ids=torch.tensor([list(ids[lo:hi])], device=dev), use_cache=True,
                           logits_to_keep=max(keep, 1), **{kw: cache}).logits
        if keep > 0:
            yield torch.log_softmax(logits[0, -keep:].float(), dim=-1)
        del logits


def js_rows(lp: torch.Tensor, lq: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (nats) row by row from log-probs: 1/2 KL(p||m) + 1/2 KL(q||m)."""
    p, q = lp.exp(), lq.exp()
    # log m = max + log((1 + exp(-|lp - lq|)) / 2): exactly lp where p == q, so a sham's JS is exactly 0
    hi = torch.maximum(lp, lq)
    gap = (lp - lq).abs().nan_to_num(nan=0.0)
    lm = hi + torch.log((1.0 + torch.exp(-gap)) * 0.5)
    kl_p = torch.where(p > 0, p * (lp - lm), torch.zeros((), dtype=p.dtype)).sum(-1)
    kl_q = torch.where(q > 0, q * (lq - lm), torch.zeros((), dtype=q.dtype)).sum(-1)
    return (0.5 * kl_p + 0.5 * kl_q).clamp(min=0)


def js_divergence(model, ids: Sequence[int], start: int, iv: Intervention,
                  chunk: int = 128, baseline: list[torch.Tensor] | None = None) -> tuple[float, float, int]:
    """Appendix C.2, Eq. 6: mean and max JS between the baseline and intervened teacher-forced
    next-token distributions at positions >= ``start``; returns (mean, max, positions).
    ``baseline``: the baseline chunks already computed (several conditions share them); by
    default they are streamed alongside, so memory stays one chunk x vocabulary."""
    total, peak, n = 0.0, 0.0, 0
    base = baseline if baseline is not None else distributions(model, ids, start, None, chunk)
    for lp, lq in zip(base, distributions(model, ids, start, iv, chunk)):
        js = js_rows(lp, lq)
        total += float(js.sum())
        peak = max(peak, float(js.max()))
        n += js.numel()
    return (total / n if n else 0.0), peak, n


def answer_logprob(model, prompt_ids: Sequence[int], answer_ids: Sequence[int], iv: Intervention | None) -> float:
    """Teacher-forced log p(answer | prompt), the intervention (if any) at its declared positions."""
    ids = list(prompt_ids) + list(answer_ids)
    got = 0.0
    k = len(prompt_ids) - 1
    for lp in distributions(model, ids, k, iv, chunk=max(len(ids), 1)):
        targets = torch.tensor(ids[k + 1:])
        got += float(lp[: len(targets)].gather(1, targets[:, None]).sum())
    return got
