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

Load: the machine is shared, so each workload runs in interleaved rounds (engine, engine without
matched branches, a slice of the naive trials, a matmul peak sample; the chunked loop in the middle
round) and the ratios and MFU use medians over the rounds, not one lucky or unlucky run. Beside the
MFU on wall time (the speed target's definition) it prints the MFU on the engine's CPU time (one thread:
the time it really ran), which other processes' load does not deflate as much.

    .venv/bin/python benchmarks/sleight_throughput.py --quick          # minutes: small workloads, 2 rounds, no memory runs
    .venv/bin/python benchmarks/sleight_throughput.py --skip-memory    # the full figures (both workloads, 3 rounds)
    .venv/bin/python benchmarks/sleight_throughput.py --memory-only    # the 200 vs 2,000-trial peak memory
    .venv/bin/python benchmarks/sleight_throughput.py --compare-packed --skip-memory  # also time plain nn.Linear

Roofline (src/tamperbench/sleight/roofline.py): each round also samples one thread's read bandwidth
(a timed ``torch.sum`` over 512 MiB, 16x the last-level cache); with the bytes of weights a forward
reads (every parameter once, the tied embedding once), the KV columns each row attends to, and the
engine's rows per step (``stats["step_profile"]``), it prints the MFU this batch profile allows at
best (per step max(flop/peak, bytes/bw): compute and memory overlapped) and at worst (their sum),
the engine's fraction of each, the rows per step the 0.7 target would need, and decoder steps timed
apart at 1 to 46 rows and the run's mean context, fitted as fixed + per row (the weight traffic and
the per-row compute as the kernels really run them; a few CPU seconds). Last, the linear layers
alone (the model's own, packed and fused as the engine runs them, chained at 1 to 46 rows): the MFU
this run's steps would reach if everything else took no time, and the time per step MFU 0.7 leaves
for attention, norms, statistics and bookkeeping beside what the measured forward spends on them. The MFU lines above it follow the speed target's definition.

The engine's linears run over oneDNN pre-packed weights (models/decoding/packed_linear.py); the
naive and chunked loops call the model as it is (packing does not help one row at a time: 0.92x).
``TAMPERBENCH_PACKED_LINEAR=0`` (inherited by the memory children) runs the engine without it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import psutil
import torch

from tamperbench.models import load_backend
from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.engine import QuestionTask, SwapEngine
from tamperbench.sleight.presets import entity_phrase, protocol_questions, protocol_words
from tamperbench.sleight import roofline

from _sleight_baselines import plain_greedy_tps, run_chunked, run_naive  # noqa: E402  (the paths the engine is timed against)
from _sleight_roofline import _median, report_roofline  # noqa: E402  (what MFU the batch profile allows)


def trials(backend, n_q: int, n_w: int, spread: bool = False):
    """The first n_q protocol questions, or (``spread``) n_q questions evenly spaced through the
    paper preset's 100, so the mix has what the paper run has: late triggers and untouched answers."""
    qs = protocol_questions()
    qs = [qs[round(i * (len(qs) - 1) / max(1, n_q - 1))] for i in range(n_q)] if spread else qs[:n_q]
    words = [entity_phrase(), *protocol_words()][:n_w]
    return [(qid, backend.chat_ids([{"role": "user", "content": q}]), words) for qid, q in qs]


MATMUL_N = 1024


def matmul_flops(n: int = MATMUL_N, reps: int = 3) -> float:
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


@torch.inference_mode()
# ------------------------------------------------------------------ 1. the engine
def run_engine(backend, det, tset, budget, batch, matched=True):
    eng = SwapEngine(backend, det, max_new_tokens=budget, batch_size=batch, matched_branches=matched)
    out = {}
    t0, c0 = time.perf_counter(), time.process_time()
    for r in eng.run([QuestionTask(q, p, list(w), False) for q, p, w in tset]):
        for sub, tr in r.trials.items():
            out[(r.question_id, sub)] = tr.token_ids
    # CPU seconds: the time this process really ran (one thread), without the waits for a shared core
    return out, time.perf_counter() - t0, dict(eng.stats, cpu_seconds=time.process_time() - c0)


# ------------------------------------------------------------------ memory (child process)
def memory_child(n_q: int, n_w: int, budget: int, batch: int) -> None:
    be = load_backend("embedded", device="cpu")
    det = TriggerDetector(be.tokenizer, ["the"])
    tset = trials(be, n_q, n_w)
    batch = batch or be.max_batch_size
    run_engine(be, det, tset[:1], 4, batch)  # warm-up
    before = psutil.Process().memory_info().rss
    _, dt, st = run_engine(be, det, tset, budget, batch)
    tokens = st["tokens"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"trials": n_q * n_w, "rss_before": before, "peak": peak, "seconds": dt, "tokens": tokens}))


def memory(n_trials: int, budget: int, batch: int | None, threads: int | None) -> dict:
    n_w = 100
    cmd = [sys.executable, __file__, "--memory-child", str(n_trials // n_w), str(n_w), str(budget), str(batch or 0)]
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
    """One workload, interleaved so machine load hits every method alike (the machine is shared):
    ``--rounds`` rounds each run the engine with and without matched branches, 1/rounds of the
    naive batch-1 trials and a matmul peak sample; the chunked loop runs once, in the middle round.
    Ratios: naive total / (rounds x median engine time), chunked / median engine time."""
    tset = trials(be, n_q, n_w, spread)
    n = n_q * n_w
    batch = args.batch_size or be.max_batch_size
    R = max(1, args.rounds)
    print(f"\n== workload {name}: {n_q} questions ({', '.join(q for q, _, _ in tset)}) x {n_w} substitutions = "
          f"{n} trials, {budget} new tokens, batch {batch}, {R} interleaved rounds", flush=True)
    keys = [(q, w) for q, _, ws in tset for w in ws]
    slices = [keys[r::R] for r in range(R)]
    peaks: list[float] = []
    bws: list[float] = []
    t_es: list[float] = []
    t_e0s: list[float] = []
    c_e0s: list[float] = []
    t_us: list[float] = []
    eng = eng0 = chk = None
    nai: dict = {}
    t_n = 0.0
    t_c = float("nan")
    stats: dict = {}
    for r in range(R):
        peaks.append(matmul_flops())
        bws.append(roofline.measure_bandwidth())
        eng, t_e, stats = run_engine(be, det, tset, budget, batch)
        t_es.append(t_e)
        peaks.append(matmul_flops())
        eng0, t_e0, stats0 = run_engine(be, det, tset, budget, batch, matched=False)
        t_e0s.append(t_e0)
        c_e0s.append(stats0["cpu_seconds"])
        print(f"round {r + 1}: engine {t_e:.1f} s, without matched branches {t_e0:.1f} s", flush=True)
        if args.compare_packed:
            os.environ["TAMPERBENCH_PACKED_LINEAR"] = "0"
            try:
                eng_u, t_u, _ = run_engine(be, det, tset, budget, batch, matched=False)
            finally:
                os.environ.pop("TAMPERBENCH_PACKED_LINEAR")
            t_us.append(t_u)
            same_u = sum(eng_u[k] == eng0[k] for k in eng0)
            print(f"round {r + 1}: without matched branches, plain nn.Linear (no packed weights) {t_u:.1f} s; "
                  f"identical trial tokens on {same_u}/{n} trials", flush=True)
        if r == R // 2:
            chk, t_c = run_chunked(be, det, tset, budget, batch)
            print(f"round {r + 1}: chunked {t_c:.1f} s", flush=True)
        if not args.skip_naive:
            part, t = run_naive(be, det, tset, budget, only=set(slices[r]))
            nai.update(part)
            t_n += t
            print(f"round {r + 1}: naive, {len(slices[r])} of {n} trials, {t:.1f} s", flush=True)
    peaks.append(matmul_flops())
    bws.append(roofline.measure_bandwidth())
    t_e, t_e0, peak = _median(t_es), _median(t_e0s), _median(peaks)
    print(f"engine : {n / t_e:8.2f} trials/s (median {t_e:.1f} s of {R}; {stats['tokens']} decoded token-rows, "
          f"{stats['steps']} steps, mean batch {stats['tokens'] / max(1, stats['steps']):.1f}; "
          f"matched-branch baseline included)")
    print(f"engine without matched branches (the same work as the loops below): {n / t_e0:8.2f} trials/s "
          f"(median {t_e0:.1f} s; {stats0['tokens']} decoded token-rows, mean batch "
          f"{stats0['tokens'] / max(1, stats0['steps']):.1f}; model forward {stats0['forward_seconds']:.1f} s = "
          f"{stats0['forward_seconds'] / stats0['seconds']:.0%} of the engine's time in the last round)")
    print(f"chunked: {n / t_c:8.2f} trials/s ({t_c:.1f} s)")
    if args.skip_naive:
        nai, t_n = eng, float("nan")
        print("naive  : skipped (--skip-naive)")
    else:
        print(f"naive  : {n / t_n:8.2f} trials/s ({t_n:.1f} s in {R} slices)")
    same0 = sum(eng0[k] == eng[k] for k in eng)
    print(f"engine with vs without matched branches: identical trial tokens on {same0}/{n} trials")
    agree_n = sum(eng[k] == nai[k] for k in eng)
    agree_c = sum(eng[k] == chk[k] for k in eng)
    naive_txt = "not run" if args.skip_naive else f"{agree_n}/{n} trials"
    print(f"agreement: engine = naive on {naive_txt}; engine = chunked on {agree_c}/{n} trials")
    trial_tokens = sum(len(v) for v in eng.values())
    if not args.skip_plain:
        tps_eng = stats["tokens"] / t_e
        tps_plain = plain_greedy_tps(be, tset, budget, batch)
        print(f"engine decoded {tps_eng:.1f} tok/s vs plain batched greedy generate {tps_plain:.1f} tok/s "
              f"= {tps_eng / tps_plain:.2f} (target >= 0.8)")
    fpt = flop_per_token(be.model)
    print(f"float32 {MATMUL_N}^3 matmul: median {peak / 1e9:.1f} GFLOP/s, best {max(peaks) / 1e9:.1f} "
          f"({len(peaks)} samples spread over the rounds)")
    for label, t in (("with matched branches", t_e), ("without", t_e0)):
        delivered = trial_tokens / t
        print(f"MFU on delivered trial tokens ({label}): {delivered:.1f} trial tok/s x {fpt / 1e6:.0f} MFLOP/token "
              f"/ {peak / 1e9:.1f} GFLOP/s float32 matmul = {delivered * fpt / peak:.2f} (target >= 0.7)")
    c_e0 = _median(c_e0s)
    print(f"MFU on delivered trial tokens (without), over the engine's CPU time instead of wall time: "
          f"{trial_tokens / c_e0:.1f} trial tok/s x {fpt / 1e6:.0f} MFLOP/token / {peak / 1e9:.1f} GFLOP/s = "
          f"{trial_tokens / c_e0 * fpt / peak:.2f} (median {c_e0:.1f} CPU s vs {t_e0:.1f} s wall: the rest is time "
          f"this one-thread process waited for a core shared with other load; load average now "
          f"{os.getloadavg()[0]:.1f})")
    report_roofline(be, stats0, t_e0, c_e0, trial_tokens, fpt, peak, bws)
    if t_us:
        print(f"oneDNN pre-packed linears (models/decoding/packed_linear.py): engine without matched branches "
              f"{_median(t_us) / t_e0:.2f}x faster than with plain nn.Linear (medians over {R} rounds)")
    print(f"ratio engine/naive: {t_n / t_e:.1f}x with matched branches, {t_n / t_e0:.1f}x without (target >= 10)")
    print(f"ratio engine/chunked: {t_c / t_e:.1f}x with matched branches, {t_c / t_e0:.1f}x without (target >= 5)")
    mfu = trial_tokens / t_e0 * fpt / peak
    ok = agree_n == n and agree_c == n and t_n / t_e0 >= 10 and t_c / t_e0 >= 5 and mfu >= 0.7
    return ok, agree_n == n and agree_c == n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small workloads, 2 rounds, no memory runs: minutes, not an hour")
    ap.add_argument("--questions", type=int, default=None)
    ap.add_argument("--words", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=None,
                    help="rows per step (default: the backend's choice, the largest that memory allows)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds per workload (default 3, quick 2)")
    ap.add_argument("--memory-budget", type=int, default=None, help="new tokens in the 200/2,000-trial memory runs")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--memory-only", action="store_true", help="only the 200 vs 2,000-trial memory runs")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--workload", choices=["first", "paper-mix", "both"], default="both",
                    help="first: the first protocol questions; paper-mix: questions spread over the paper preset")
    ap.add_argument("--paper-questions", type=int, default=6)
    ap.add_argument("--paper-words", type=int, default=None, help="default 8 (quick 3)")
    ap.add_argument("--paper-max-new-tokens", type=int, default=None, help="default 128 (quick 48)")
    ap.add_argument("--skip-naive", action="store_true", help="skip the batch-1 loop (slowest); no naive ratio")
    ap.add_argument("--skip-plain", action="store_true", help="skip plain batched generate")
    ap.add_argument("--compare-packed", action="store_true",
                    help="each round also times the engine with plain nn.Linear (TAMPERBENCH_PACKED_LINEAR=0)")
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
    paper_w = args.paper_words or (3 if args.quick else 8)
    paper_budget = args.paper_max_new_tokens or (48 if args.quick else 128)
    args.rounds = args.rounds or (2 if args.quick else 3)
    mem_budget = args.memory_budget or (8 if args.quick else 32)
    if args.memory_only:
        return 0 if report_memory(mem_budget, args) else 1
    be = load_backend("embedded", device="cpu")
    det = TriggerDetector(be.tokenizer, ["the"])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f} "
          "(shared machine: seconds are noisy; ratios come from interleaved rounds in one process)")
    run_engine(be, det, trials(be, 1, 1), 4, args.batch_size or be.max_batch_size)  # warm-up
    workloads = {"first": (n_q, n_w, budget, False),
                 "paper-mix": (args.paper_questions, paper_w, paper_budget, True)}
    chosen = ["first", "paper-mix"] if args.workload == "both" else [args.workload]
    ok = agree = True
    for name in chosen:
        w_ok, w_agree = workload(be, det, name, *workloads[name], args)
        ok, agree = ok and w_ok, agree and w_agree
    if args.skip_memory or args.quick:
        print("\nmemory runs skipped (--quick / --skip-memory); run them alone with --memory-only")
    else:
        ok = report_memory(mem_budget, args) and ok
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    print("PASS" if ok else "FAIL (see lines above)")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
