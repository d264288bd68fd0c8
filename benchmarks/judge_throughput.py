"""Judge throughput: judgments/s of the embedded judge, batched vs one at a time, same process.

Usage: .venv/bin/python benchmarks/judge_throughput.py [--n 16] [--max-new-tokens 64] [--device cpu]

WHY: judging 10,100 replies per model with three judges is the expensive step of the protocol on
local hardware; batching is what makes it affordable. Both modes run the exact production path
(``tamperbench.judge.jury.judge_items``: prompt building, generation, parsing, the stricter retry)
on the same replies, after one warm-up call, three ways: batched with prefix reuse, batched
without, and one at a time; each line says where the time went (prefill vs decode tokens and
seconds, from ``backend.generation_stats``). Target: batched at least 4x one-at-a-time.

Prefix reuse (models/prefix_share.py) has two parts here. Within a call, the prompts share only the
system prompt and the template's first line (~72 tokens of the embedded judge's ~550): the paper's
Appendix G template puts the question and the reply before its ~250-token rubric, and that order is
kept. Across the two calls of ``judge_items``, the stricter retry is the first conversation plus
its answer and one reminder; inside ``backend.prefix_memory()`` it starts from the first call's KV
and prefills only the answer's re-tokenised tail and the reminder.
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

    stats: dict[str, float] = {}
    plain_generate = backend.generate_chat

    def counting_generate(*a, share_prefix: bool = True, **kw):  # where the time goes, per mode
        out = plain_generate(*a, share_prefix=share_prefix and mode["share"], **kw)
        for k, v in backend.generation_stats.items():  # counts add up; labels (the attention path) are kept
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                stats[k] = stats.get(k, 0) + v
            else:
                stats[k] = v
        return out

    backend.generate_chat = counting_generate
    mode = {"share": True}
    results = {}
    for name, share, batched in (("batched, prefix reuse", True, True), ("batched, no reuse", False, True),
                                 ("one at a time", False, False)):
        mode["share"] = share
        stats.clear()
        start = time.perf_counter()
        if batched:
            votes = judge_items(backend, args.model, items, max_new_tokens=args.max_new_tokens)
        else:
            votes = [v for it in items for v in judge_items(backend, args.model, [it], max_new_tokens=args.max_new_tokens)]
        results[name] = (votes, time.perf_counter() - start, dict(stats))

    print(f"model={args.model} device={backend.provenance.device} dtype={backend.provenance.dtype} n={args.n} "
          f"max_new_tokens={args.max_new_tokens} batch_size={backend.max_batch_size} threads={torch.get_num_threads()} "
          f"load average {os.getloadavg()[0]:.1f} (shared machine: seconds are noisy; ratios are from one process)")
    for name, (votes, t, st) in results.items():
        retries = sum(v.attempts - 1 for v in votes)
        print(f"{name:22s}: {len(votes) / t:8.3f} judgments/s ({t:.1f} s, {retries} retries); "
              f"prefill {int(st.get('prefill_tokens', 0))} tokens in {st.get('prefill_seconds', 0):.1f} s "
              f"(alone: {int(st.get('prefill_tokens_alone', 0))}), decode {int(st.get('decode_tokens', 0))} tokens "
              f"in {st.get('decode_seconds', 0):.1f} s")
    ref = results["batched, prefix reuse"][0]
    for name, (votes, _, _) in results.items():
        same = sum(a.raw_text == b.raw_text and a.retry_text == b.retry_text for a, b in zip(ref, votes))
        print(f"identical replies, prefix reuse vs {name}: {same}/{len(votes)}")
    t_one = results["one at a time"][1]
    for name in ("batched, prefix reuse", "batched, no reuse"):
        r = t_one / results[name][1]
        print(f"speedup {name} vs one at a time: {r:.2f}x (target >= 4x: {'met' if r >= 4 else 'NOT met'})")


if __name__ == "__main__":
    main()
