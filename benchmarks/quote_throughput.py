"""Exact Words generation with and without prefix reuse, same prompts, one process.

Usage:
    .venv/bin/python benchmarks/quote_throughput.py                       # both presets, in full
    .venv/bin/python benchmarks/quote_throughput.py --items 8 --max-new-tokens 16 --preset standard

WHY: every Exact Words prompt is the chat template's system prompt, then a document, then one
instruction; a document's 3 to 4 items and both arms share it, and the ``depth`` preset puts the
same ~3,000-token fused document before all of its 74 prompts. With prefix reuse
(models/prefix_share.py) each shared prefix is prefilled once per generation call.

Both modes run the production path (``generate_chat`` on the prompts the quote runner builds, in
the runner's order and chunks of the batch size), greedy. The benchmark checks the answers are
token for token identical, prints wall time, prefill tokens fed and the ratio. Targets (issue 14):
standard >= 3x, depth >= 8x, in full presets with the default 96 new tokens. ``--items N`` takes
the first N items (both arms) when the full presets do not fit the time available; the ratio then
understates the full preset's (fewer prompts share each prefix), so it is printed next to the
measured prefill/decode split.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TAMPERBENCH_HOME", str(Path(__file__).resolve().parents[1] / ".tb_home"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def prompts_for(preset: str, n_items: int | None) -> list[str]:
    """The quote runner's prompts for both arms, in its plan order (sorted by prompt text)."""
    from tamperbench.quote.items import ARMS, build_prompt, load_items

    items = load_items(preset)[: n_items or None]
    return sorted(build_prompt(it, arm) for it in items for arm in ARMS)


def generate(backend, prompts: list[str], *, max_new_tokens: int, share: bool) -> tuple[list, float, dict]:
    """The runner's chunks of the batch size; returns generations, seconds and summed stats."""
    bs = max(1, int(backend.max_batch_size))
    gens, stats = [], {}
    t0 = time.perf_counter()
    for s in range(0, len(prompts), bs):
        convs = [[{"role": "user", "content": p}] for p in prompts[s:s + bs]]
        gens += backend.generate_chat(convs, max_new_tokens=max_new_tokens, progress=False, share_prefix=share)
        for k, v in backend.generation_stats.items():
            stats[k] = stats.get(k, 0) + v
    return gens, time.perf_counter() - t0, stats


def bench(backend, preset: str, n_items: int | None, max_new_tokens: int, alone_first: bool = False
          ) -> tuple[float, bool]:
    prompts = prompts_for(preset, n_items)
    if alone_first:
        alone, t_a, st_a = generate(backend, prompts, max_new_tokens=max_new_tokens, share=False)
    shared, t_s, st_s = generate(backend, prompts, max_new_tokens=max_new_tokens, share=True)
    if not alone_first:
        alone, t_a, st_a = generate(backend, prompts, max_new_tokens=max_new_tokens, share=False)
    same = sum(a.token_ids == b.token_ids for a, b in zip(alone, shared))
    ratio = t_a / t_s
    print(f"[{preset}] {len(prompts)} prompts ({n_items or 'all'} items x 2 arms), {max_new_tokens} new tokens, "
          f"batch {backend.max_batch_size}")
    for name, t, st in (("alone ", t_a, st_a), ("shared", t_s, st_s)):
        print(f"  {name}: {t:7.1f} s; prefill {st['prefill_tokens']:6d} tokens in {st['prefill_seconds']:6.1f} s, "
              f"decode {st['decode_tokens']:5d} tokens in {st['decode_seconds']:6.1f} s")
    print(f"  identical answers: {same}/{len(prompts)}")
    target = {"standard": 3, "depth": 8}.get(preset)
    verdict = "" if target is None else f" (target >= {target}x: {'met' if ratio >= target else 'NOT met'})"
    print(f"  ratio alone/shared: {ratio:.2f}x{verdict}; prefill tokens {st_a['prefill_tokens'] / st_s['prefill_tokens']:.1f}x "
          f"fewer", flush=True)
    return ratio, same == len(prompts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=["standard", "depth", "both"], default="both")
    ap.add_argument("--items", type=int, default=None, help="first N items of the preset (default: all)")
    ap.add_argument("--depth-items", type=int, default=None, help="first N items of depth (default: --items)")
    ap.add_argument("--max-new-tokens", type=int, default=96, help="the quote runner's default is 96")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--alone-first", action="store_true", help="run the no-reuse baseline first (order check)")
    args = ap.parse_args()

    import torch

    from tamperbench.models import load_backend

    if args.threads:
        torch.set_num_threads(args.threads)
    backend = load_backend("embedded", device="cpu", batch_size=args.batch_size)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f} "
          f"(shared machine: absolute seconds are noisy, the ratio is measured in one process)")
    backend.generate_chat([[{"role": "user", "content": "Hello."}]] * 2, max_new_tokens=2, progress=False)  # warm-up
    ok = True
    presets = ["standard", "depth"] if args.preset == "both" else [args.preset]
    for preset in presets:
        n = args.depth_items if preset == "depth" and args.depth_items else args.items
        _, same = bench(backend, preset, n, args.max_new_tokens, args.alone_first)
        ok = ok and same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
