"""Judge throughput: judgments/s of the embedded judge, batched vs one at a time, same process.

Usage: .venv/bin/python benchmarks/judge_throughput.py [--n 16] [--max-new-tokens 64] [--device cpu] [--rounds 2]

WHY: judging 10,100 replies per model with three judges is the expensive step of the protocol on
local hardware; batching is what makes it affordable. Both modes run the exact production path
(``tamperbench.judge.jury.judge_items``: prompt building, generation, parsing, the stricter retry)
on the same replies, after one warm-up call, three ways: batched with prefix reuse, batched
without, and one at a time; each line says where the time went (prefill vs decode tokens and
seconds, from ``backend.generation_stats``). Target: batched at least 4x one-at-a-time. Timed by
benchmarks/_harness.py (one thread unless ``--threads``, rotated rounds, medians, load and machine).

Prefix reuse (models/prefix_share.py) has two parts here. Within a call, the prompts share only the
system prompt and the template's first line (~72 tokens of the embedded judge's ~550): the paper's
Appendix G template puts the question and the reply before its ~250-token rubric, and that order is
kept. Across the two calls of ``judge_items``, the stricter retry is the first conversation plus
its answer and one reminder; inside ``backend.prefix_memory()`` it starts from the first call's KV
and prefills only the answer's re-tokenised tail and the reminder.
"""

from __future__ import annotations

import os
from pathlib import Path

from _harness import Arm, compare, parser, report, single_thread

single_thread()  # before torch starts its pools
os.environ.setdefault("TAMPERBENCH_HOME", str(Path(__file__).resolve().parents[1] / ".tb_home"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = parser(__doc__, rounds=2)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--n", type=int, default=16, help="replies to judge in each mode")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    single_thread(args.threads)

    from tamperbench.judge.jury import judge_items
    from tamperbench.judge.prompt import JudgeInput
    from tamperbench.judge.samples import SAMPLES
    from tamperbench.models import load_backend

    backend = load_backend(args.model, device=args.device, batch_size=args.n)
    items = [JudgeInput(trial_key=f"bench-{i}", question=s.question, trigger="the", substitution=s.substitution,
                        reply=s.reply) for i, s in ((i, SAMPLES[i % len(SAMPLES)]) for i in range(args.n))]
    stats: dict[str, float] = {}
    plain_generate = backend.generate_chat
    mode = {"share": True}

    def counting_generate(*a, share_prefix: bool = True, **kw):  # where the time goes, per mode
        out = plain_generate(*a, share_prefix=share_prefix and mode["share"], **kw)
        for k, v in backend.generation_stats.items():  # counts add up; labels (the attention path) are kept
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                stats[k] = stats.get(k, 0) + v
            else:
                stats[k] = v
        return out

    backend.generate_chat = counting_generate
    results: dict[str, tuple[list, dict]] = {}

    def arm(name: str, share: bool, batched: bool) -> Arm:
        def run() -> int:
            mode["share"] = share
            stats.clear()
            if batched:
                votes = judge_items(backend, args.model, items, max_new_tokens=args.max_new_tokens)
            else:
                votes = [v for it in items for v in judge_items(backend, args.model, [it], max_new_tokens=args.max_new_tokens)]
            results[name] = (votes, dict(stats))  # the last round's
            return len(votes)
        return Arm(name, run)

    print(f"model={args.model} device={backend.provenance.device} dtype={backend.provenance.dtype} n={args.n} "
          f"max_new_tokens={args.max_new_tokens} batch_size={backend.max_batch_size}")
    result = compare([arm("one at a time", False, False), arm("batched, no reuse", False, True),
                      arm("batched, prefix reuse", True, True)], rounds=args.rounds)
    report(result, unit="judgments")
    for name, (votes, st) in results.items():
        retries = sum(v.attempts - 1 for v in votes)
        print(f"{name:22s}: {retries} retries; prefill {int(st.get('prefill_tokens', 0))} tokens in "
              f"{st.get('prefill_seconds', 0):.1f} s (alone: {int(st.get('prefill_tokens_alone', 0))}), decode "
              f"{int(st.get('decode_tokens', 0))} tokens in {st.get('decode_seconds', 0):.1f} s")
    ref = results["batched, prefix reuse"][0]
    for name, (votes, _) in results.items():
        same = sum(a.raw_text == b.raw_text and a.retry_text == b.retry_text for a, b in zip(ref, votes))
        print(f"identical replies, prefix reuse vs {name}: {same}/{len(votes)}")
    for name in ("batched, prefix reuse", "batched, no reuse"):
        r = result.ratio(name)
        print(f"speedup {name} vs one at a time: {r:.2f}x (target >= 4x: {'met' if r >= 4 else 'NOT met'})")


if __name__ == "__main__":
    main()
