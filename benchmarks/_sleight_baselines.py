"""The decoding paths benchmarks/sleight_throughput.py times the swap engine against: the naive loop
(one trial at a time, KV cache, batch 1), the chunked ``model.generate`` loop that stops at each swap,
and plain batched greedy decoding (tokens/s without any swap). Kept apart so the benchmark script
states its workloads and figures, and stays under the 400-line limit.
"""

from __future__ import annotations

import time
from collections import deque

import torch
from transformers import DynamicCache, StoppingCriteria, StoppingCriteriaList


# ------------------------------------------------------------------ 2. naive, KV cache, batch 1
@torch.inference_mode()
def naive_trial(model, det, eos, prompt, sub, budget):
    cache = DynamicCache(config=model.config)

    def feed(ids):
        logits = model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True, logits_to_keep=1).logits
        return torch.log_softmax(logits[0, -1].float(), -1)

    lp = feed(prompt)
    out, queue = [], deque()
    while len(out) < budget:
        if queue:
            tok, injected = queue.popleft(), True
        else:
            tok, injected = int(lp.argmax()), False
            if tok not in eos and det.is_candidate(tok):
                prev = out[-1] if out else None
                lp2 = feed([tok])  # look ahead one token
                nxt = None if len(out) + 1 >= budget else int(lp2.argmax())
                occ = det.classify(prev, tok, None if nxt in eos else nxt)
                if occ.kind == "swap":
                    cache.crop(-1)  # roll the trigger back
                    queue.extend(det.replacement_ids(occ, sub, prev)[: budget - len(out)])
                    tok, injected = queue.popleft(), True
                else:
                    out.append(tok)
                    lp = lp2
                    continue
        out.append(tok)
        if (tok in eos and not injected) or len(out) >= budget:
            break
        lp = feed([tok])
    return out


def run_naive(backend, det, tset, budget, only=None):
    """Every trial (or the trials in ``only``) one at a time."""
    eos = set(backend.eos_ids)
    out = {}
    t0 = time.perf_counter()
    for qid, prompt, words in tset:
        for sub in words:
            if only is None or (qid, sub) in only:
                out[(qid, sub)] = naive_trial(backend.model, det, eos, prompt, sub, budget)
    return out, time.perf_counter() - t0


# ------------------------------------------------------------------ 3. chunked: generate to a trigger, splice, regenerate
class _StopAtSwap(StoppingCriteria):
    """Per row: stop once the token before the last is a confirmed whole-word trigger (the last
    token is its look-ahead), or once the row's own budget is used."""

    def __init__(self, det, eos, start, rows):
        self.det, self.eos, self.start, self.rows = det, eos, start, rows

    def __call__(self, input_ids, scores, **kwargs):
        done = []
        for i, (out, budget) in enumerate(self.rows):
            g = input_ids[i, self.start:].tolist()
            stop = len(out) + len(g) > budget or (g and g[-1] in self.eos)
            if not stop and len(g) >= 2 and self.det.is_candidate(g[-2]):
                prev = g[-3] if len(g) >= 3 else (out[-1] if out else None)
                stop = self.det.classify(prev, g[-2], g[-1]).kind == "swap"
            done.append(stop)
        return torch.tensor(done, device=input_ids.device)


def _first_swap(det, eos, out, g, budget):
    """Index in g of the first confirmed trigger (look-ahead within g, or end of budget)."""
    for i, tok in enumerate(g):
        if len(out) + i >= budget or tok in eos:
            return None
        if det.is_candidate(tok):
            prev = g[i - 1] if i else (out[-1] if out else None)
            if len(out) + i + 1 >= budget:
                nxt = None
            elif i + 1 < len(g):
                nxt = None if g[i + 1] in eos else g[i + 1]
            else:
                return None
            occ = det.classify(prev, tok, nxt)
            if occ.kind == "swap":
                return i, occ, prev
    return None


@torch.inference_mode()
def run_chunked(backend, det, tset, budget, batch):
    eos = set(backend.eos_ids)
    state = {(q, sub): (prompt, []) for q, prompt, words in tset for sub in words}
    active = list(state)
    t0 = time.perf_counter()
    while active:
        nxt_round = []
        for s in range(0, len(active), batch):
            keys = active[s: s + batch]
            ctx = [state[k][0] + state[k][1] for k in keys]
            L = max(map(len, ctx))
            ids = torch.tensor([[backend.pad_id] * (L - len(c)) + c for c in ctx])
            am = torch.tensor([[0] * (L - len(c)) + [1] * len(c) for c in ctx])
            rows = [(state[k][1], budget) for k in keys]
            room = max(budget - len(o) for o, _ in rows) + 1
            gen = backend.model.generate(input_ids=ids, attention_mask=am, max_new_tokens=room, do_sample=False,
                                         pad_token_id=backend.pad_id,
                                         stopping_criteria=StoppingCriteriaList([_StopAtSwap(det, eos, L, rows)]))
            for k, row in zip(keys, gen[:, L:].tolist()):
                out = state[k][1]
                hit = _first_swap(det, eos, out, row, budget)
                if hit is None:  # no swap: keep up to EOS / budget, done
                    for tok in row:
                        if len(out) >= budget:
                            break
                        out.append(tok)
                        if tok in eos:
                            break
                    continue
                i, occ, prev = hit
                out.extend(row[:i])
                out.extend(det.replacement_ids(occ, k[1], prev)[: budget - len(out)])
                if len(out) < budget:
                    nxt_round.append(k)
        active = nxt_round
    return {k: v[1] for k, v in state.items()}, time.perf_counter() - t0


# ------------------------------------------------------------------ plain batched greedy
@torch.inference_mode()
def plain_greedy_tps(backend, tset, budget, batch):
    eos = set(backend.eos_ids)
    ps = [p for _, p, _ in tset]
    ps = [ps[i % len(ps)] for i in range(batch)]
    L = max(map(len, ps))
    ids = torch.tensor([[backend.pad_id] * (L - len(p)) + p for p in ps])
    am = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in ps])
    t0 = time.perf_counter()
    gen = backend.model.generate(input_ids=ids, attention_mask=am, max_new_tokens=budget, do_sample=False,
                                 pad_token_id=backend.pad_id)
    dt = time.perf_counter() - t0
    n = 0
    for row in gen[:, L:].tolist():
        n += next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
    return n / dt
