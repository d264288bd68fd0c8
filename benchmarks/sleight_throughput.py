"""Sleight of Word trials three ways in one process: the swap engine; a naive per-trial loop
with a KV cache at batch 1; a chunked loop that generates (batched, with transformers
``generate``) to the first confirmed trigger, splices the replacement in and regenerates.

Checks the three agree token for token, prints trials/s and the ratios, the engine's decoded
tokens/s against plain batched greedy ``generate`` of the same model, and (in child processes)
the peak memory of the engine for 2,000 vs 200 trials, and the model FLOP utilisation on delivered
trial tokens (trial tokens/s x FLOP per token / float32 matmul FLOP/s measured in the same run).
Two workloads: ``first`` (the first protocol questions) and ``paper-mix`` (6 questions spread over
the paper preset's 100, 8 words, 128 tokens: late triggers and untouched answers included).
Targets (issues 3 and 14): >= 10x naive, >= 5x chunked, >= 0.8 of plain batched greedy tokens/s,
MFU >= 0.7, peak memory within 15%.

    .venv/bin/python benchmarks/sleight_throughput.py --quick
    .venv/bin/python benchmarks/sleight_throughput.py
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import deque

import psutil
import torch
from transformers import DynamicCache, StoppingCriteria, StoppingCriteriaList

from tamperbench.models import load_backend
from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.engine import QuestionTask, SwapEngine
from tamperbench.sleight.presets import entity_phrase, protocol_questions, protocol_words


def trials(backend, n_q: int, n_w: int, spread: bool = False):
    """The first n_q protocol questions, or (``spread``) n_q questions evenly spaced through the
    paper preset's 100, so the mix has what the paper run has: late triggers and untouched answers."""
    qs = protocol_questions()
    qs = [qs[round(i * (len(qs) - 1) / max(1, n_q - 1))] for i in range(n_q)] if spread else qs[:n_q]
    words = [entity_phrase(), *protocol_words()][:n_w]
    return [(qid, backend.chat_ids([{"role": "user", "content": q}]), words) for qid, q in qs]


def matmul_flops(n: int = 1024, reps: int = 3) -> float:
    """float32 FLOP/s of one n x n x n matmul on this machine now (best of ``reps``): the ceiling."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def flop_per_token(model) -> float:
    """2 x parameters (every weight is one multiply-add per token; the tied embedding counted once,
    as the output projection); attention over the context is left out (small at these lengths)."""
    return 2.0 * sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------ 1. the engine
def run_engine(backend, det, tset, budget, batch, matched=True):
    eng = SwapEngine(backend, det, max_new_tokens=budget, batch_size=batch, matched_branches=matched)
    out = {}
    t0 = time.perf_counter()
    for r in eng.run([QuestionTask(q, p, list(w), False) for q, p, w in tset]):
        for sub, tr in r.trials.items():
            out[(r.question_id, sub)] = tr.token_ids
    return out, time.perf_counter() - t0, eng.stats["tokens"]


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


def run_naive(backend, det, tset, budget):
    eos = set(backend.eos_ids)
    out = {}
    t0 = time.perf_counter()
    for qid, prompt, words in tset:
        for sub in words:
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


# ------------------------------------------------------------------ memory (child process)
def memory_child(n_q: int, n_w: int, budget: int, batch: int) -> None:
    be = load_backend("embedded", device="cpu")
    det = TriggerDetector(be.tokenizer, ["the"])
    tset = trials(be, n_q, n_w)
    run_engine(be, det, tset[:1], 4, batch)  # warm-up
    before = psutil.Process().memory_info().rss
    _, dt, tokens = run_engine(be, det, tset, budget, batch)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"trials": n_q * n_w, "rss_before": before, "peak": peak, "seconds": dt, "tokens": tokens}))


def memory(n_trials: int, budget: int, batch: int, threads: int | None) -> dict:
    n_w = 100
    cmd = [sys.executable, __file__, "--memory-child", str(n_trials // n_w), str(n_w), str(budget), str(batch)]
    if threads:
        cmd += ["--threads", str(threads)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def report_memory(mem_budget: int, args) -> bool:
    small = memory(200, mem_budget, args.batch_size, args.threads)
    large = memory(2000, mem_budget, args.batch_size, args.threads)
    mib = lambda b: b / 2**20  # noqa: E731
    for m in (small, large):
        print(f"memory {m['trials']:5d} trials ({mem_budget} new tokens, {m['seconds']:.0f} s): "
              f"peak RSS {mib(m['peak']):.0f} MiB, growth during the run {mib(m['peak'] - m['rss_before']):.0f} MiB")
    ratio = large["peak"] / small["peak"]
    print(f"peak memory 2,000/200 trials: {ratio:.3f} (target <= 1.15)")
    return ratio <= 1.15


def workload(be, det, name: str, n_q: int, n_w: int, budget: int, spread: bool, args) -> tuple[bool, bool]:
    """One workload: engine (with and without matched branches), chunked, naive; agreement, ratios, MFU."""
    tset = trials(be, n_q, n_w, spread)
    n = n_q * n_w
    print(f"\n== workload {name}: {n_q} questions ({', '.join(q for q, _, _ in tset)}) x {n_w} substitutions = "
          f"{n} trials, {budget} new tokens, batch {args.batch_size}")
    peak0 = matmul_flops()
    eng, t_e, dec_tokens = run_engine(be, det, tset, budget, args.batch_size)
    print(f"engine : {n / t_e:8.2f} trials/s ({t_e:.1f} s, {dec_tokens} decoded token-rows, "
          f"matched-branch baseline included)", flush=True)
    eng0, t_e0, dec_tokens0 = run_engine(be, det, tset, budget, args.batch_size, matched=False)
    peak = max(peak0, matmul_flops())
    print(f"engine without matched branches (the same work as the loops below): {n / t_e0:8.2f} trials/s "
          f"({t_e0:.1f} s, {dec_tokens0} decoded token-rows)", flush=True)
    chk, t_c = run_chunked(be, det, tset, budget, args.batch_size)
    print(f"chunked: {n / t_c:8.2f} trials/s ({t_c:.1f} s)", flush=True)
    if args.skip_naive:
        nai, t_n = eng, float("nan")
        print("naive  : skipped (--skip-naive)")
    else:
        nai, t_n = run_naive(be, det, tset, budget)
        print(f"naive  : {n / t_n:8.2f} trials/s ({t_n:.1f} s)")
    same0 = sum(eng0[k] == eng[k] for k in eng)
    print(f"engine with vs without matched branches: identical trial tokens on {same0}/{n} trials")
    agree_n = sum(eng[k] == nai[k] for k in eng)
    agree_c = sum(eng[k] == chk[k] for k in eng)
    naive_txt = "not run" if args.skip_naive else f"{agree_n}/{n} trials"
    print(f"agreement: engine = naive on {naive_txt}; engine = chunked on {agree_c}/{n} trials")
    trial_tokens = sum(len(v) for v in eng.values())
    tps_eng = dec_tokens / t_e
    if not args.skip_plain:
        tps_plain = plain_greedy_tps(be, tset, budget, args.batch_size)
        print(f"engine decoded {tps_eng:.1f} tok/s vs plain batched greedy generate {tps_plain:.1f} tok/s "
              f"= {tps_eng / tps_plain:.2f} (target >= 0.8)")
    fpt = flop_per_token(be.model)
    for label, t in (("with matched branches", t_e), ("without", t_e0)):
        delivered = trial_tokens / t
        print(f"MFU on delivered trial tokens ({label}): {delivered:.1f} trial tok/s x {fpt / 1e6:.0f} MFLOP/token "
              f"/ {peak / 1e9:.1f} GFLOP/s float32 matmul = {delivered * fpt / peak:.2f} (target >= 0.7)")
    print(f"ratio engine/naive: {t_n / t_e:.1f}x with matched branches, {t_n / t_e0:.1f}x without (target >= 10)")
    print(f"ratio engine/chunked: {t_c / t_e:.1f}x with matched branches, {t_c / t_e0:.1f}x without (target >= 5)")
    mfu = trial_tokens / t_e0 * fpt / peak
    ok = agree_n == n and agree_c == n and t_n / t_e0 >= 10 and t_c / t_e0 >= 5 and mfu >= 0.7
    return ok, agree_n == n and agree_c == n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--questions", type=int, default=None)
    ap.add_argument("--words", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--memory-budget", type=int, default=None, help="new tokens in the 200/2,000-trial memory runs")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--memory-only", action="store_true", help="only the 200 vs 2,000-trial memory runs")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--workload", choices=["first", "paper-mix", "both"], default="both",
                    help="first: the first protocol questions; paper-mix: questions spread over the paper preset")
    ap.add_argument("--paper-questions", type=int, default=6)
    ap.add_argument("--paper-words", type=int, default=8)
    ap.add_argument("--paper-max-new-tokens", type=int, default=128)
    ap.add_argument("--skip-naive", action="store_true", help="skip the batch-1 loop (slowest); no naive ratio")
    ap.add_argument("--skip-plain", action="store_true", help="skip plain batched generate")
    ap.add_argument("--memory-child", nargs=4, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.memory_child:
        memory_child(*args.memory_child)
        return 0
    n_q = args.questions or (3 if args.quick else 6)
    n_w = args.words or (6 if args.quick else 16)
    budget = args.max_new_tokens or (32 if args.quick else 64)
    mem_budget = args.memory_budget or (8 if args.quick else 32)
    if args.memory_only:
        return 0 if report_memory(mem_budget, args) else 1
    be = load_backend("embedded", device="cpu")
    det = TriggerDetector(be.tokenizer, ["the"])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f} "
          "(shared machine: seconds are noisy; ratios are measured in one process)")
    run_engine(be, det, trials(be, 1, 1), 4, args.batch_size)  # warm-up
    workloads = {"first": (n_q, n_w, budget, False),
                 "paper-mix": (args.paper_questions, args.paper_words, args.paper_max_new_tokens, True)}
    chosen = ["first", "paper-mix"] if args.workload == "both" else [args.workload]
    ok = agree = True
    for name in chosen:
        w_ok, w_agree = workload(be, det, name, *workloads[name], args)
        ok, agree = ok and w_ok, agree and w_agree
    if not args.skip_memory:
        ok = report_memory(mem_budget, args) and ok
    print("PASS" if ok else "FAIL (see lines above)")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
