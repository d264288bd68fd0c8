"""Judge throughput: judgments/s of the embedded judge, batched vs one at a time, same process.

Usage: .venv/bin/python benchmarks/judge_throughput.py [--n 16] [--max-new-tokens 64] [--device cpu]

WHY: judging 10,100 replies per model with three judges is the expensive step of the protocol on
local hardware; batching is what makes it affordable. Both modes run the exact production path
(``tamperbench.judge.jury.judge_items``: prompt building, generation, parsing, the stricter retry)
on the same replies, after one warm-up call. Target: batched at least 4x one-at-a-time.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TAMPERBENCH_HOME", str(Path(__file__).resolve().parents[1] / ".tb_home"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--n", type=int, default=16, help="replies to judge in each mode")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    args = parser.parse_args()

    import torch

    from tamperbench.judge.jury import judge_items
    from tamperbench.judge.prompt import JudgeInput
    from tamperbench.judge.samples import SAMPLES
    from tamperbench.models import load_backend

    if args.threads:
        torch.set_num_threads(args.threads)
    backend = load_backend(args.model, device=args.device, batch_size=args.n)
    items = [JudgeInput(trial_key=f"bench-{i}", question=s.question, trigger="the", substitution=s.substitution,
                        reply=s.reply) for i, s in ((i, SAMPLES[i % len(SAMPLES)]) for i in range(args.n))]
    judge_items(backend, args.model, items[:2], max_new_tokens=8)  # warm-up (kernels, allocator)

    start = time.perf_counter()
    batched = judge_items(backend, args.model, items, max_new_tokens=args.max_new_tokens)
    t_batched = time.perf_counter() - start

    start = time.perf_counter()
    single = [v for it in items for v in judge_items(backend, args.model, [it], max_new_tokens=args.max_new_tokens)]
    t_single = time.perf_counter() - start

    rate_b, rate_s = len(batched) / t_batched, len(single) / t_single
    retries_b = sum(v.attempts - 1 for v in batched)
    retries_s = sum(v.attempts - 1 for v in single)
    print(f"model={args.model} device={backend.provenance.device} dtype={backend.provenance.dtype} n={args.n} "
          f"max_new_tokens={args.max_new_tokens} batch_size={backend.max_batch_size} threads={torch.get_num_threads()}")
    print(f"batched:      {rate_b:8.3f} judgments/s ({t_batched:.1f} s, {retries_b} retries)")
    print(f"one at a time:{rate_s:8.3f} judgments/s ({t_single:.1f} s, {retries_s} retries)")
    print(f"speedup: {rate_b / rate_s:.2f}x (target >= 4x: {'met' if rate_b / rate_s >= 4 else 'NOT met'})")


if __name__ == "__main__":
    main()
