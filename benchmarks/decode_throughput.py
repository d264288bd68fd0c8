"""Our step decoder vs transformers' own ``generate`` on the same prompts, in one process.

Checks that both emit identical greedy tokens, then prints tokens/s for each, their ratio, and
the step decoder at batch 64 vs batch 1. Targets (issue 2): ours >= generate at batch 64;
batch 64 >= 6x the tokens/s of batch 1.

    .venv/bin/python benchmarks/decode_throughput.py            # 64 prompts x 64 new tokens
    .venv/bin/python benchmarks/decode_throughput.py --quick    # 64 prompts x 16 new tokens

Tokens are counted per row up to and including EOS (both loops stop a row there).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from tamperbench.models import load_backend
from tamperbench.sleight.presets import protocol_questions


def prompts(backend, n: int) -> list[list[int]]:
    qs = [q for _, q in protocol_questions()]
    return [backend.chat_ids([{"role": "user", "content": qs[i % len(qs)]}]) for i in range(n)]


def until_eos(ids: list[int], eos: set[int]) -> list[int]:
    for i, t in enumerate(ids):
        if t in eos:
            return ids[: i + 1]
    return ids


def ours(backend, ps: list[list[int]], new: int, batch: int) -> tuple[list[list[int]], float]:
    """Step decoder, continuous batching: a finished row's slot is released at once."""
    out: list[list[int] | None] = [None] * len(ps)
    t0 = time.perf_counter()
    for start in range(0, len(ps), batch):
        dec = backend.step_decoder(capacity=batch)
        chunk = list(range(start, min(start + batch, len(ps))))
        row_of = dict(zip(dec.add_rows([ps[i] for i in chunk]), chunk))
        while row_of:
            done = []
            for r in dec.step():
                if r.is_eos or len(dec.generated(r.row)) >= new:
                    out[row_of.pop(r.row)] = dec.generated(r.row)
                    done.append(r.row)
            dec.release(done)
    return out, time.perf_counter() - t0


@torch.inference_mode()
def hf_generate(backend, ps: list[list[int]], new: int, batch: int) -> tuple[list[list[int]], float]:
    eos = set(backend.eos_ids)
    out = []
    t0 = time.perf_counter()
    for start in range(0, len(ps), batch):
        chunk = ps[start: start + batch]
        L = max(map(len, chunk))
        ids = torch.tensor([[backend.pad_id] * (L - len(p)) + p for p in chunk], device=backend.device)
        am = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in chunk], device=backend.device)
        gen = backend.model.generate(input_ids=ids, attention_mask=am, max_new_tokens=new, do_sample=False,
                                     pad_token_id=backend.pad_id)
        out.extend(until_eos(g[L:].tolist(), eos) for g in gen)
    return out, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="16 new tokens instead of 64")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=None)
    ap.add_argument("--batch1-prompts", type=int, default=None, help="prompts decoded one at a time (default 4)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    new = args.new_tokens or (16 if args.quick else 64)
    n1 = args.batch1_prompts or (2 if args.quick else 4)
    be = load_backend("embedded", device="cpu")
    ps = prompts(be, args.prompts)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}; "
          f"{len(ps)} prompts, {new} new tokens, greedy")
    ours(be, ps[:2], 2, 2)  # warm-up (allocator, kernels)
    tok_g, t_g = hf_generate(be, ps, new, len(ps))
    tok_o, t_o = ours(be, ps, new, len(ps))
    same = sum(a == b for a, b in zip(tok_o, tok_g))
    n_o, n_g = sum(map(len, tok_o)), sum(map(len, tok_g))
    tok_1, t_1 = ours(be, ps[:n1], new, 1)
    n_1 = sum(map(len, tok_1))
    same1 = sum(a == b for a, b in zip(tok_1, tok_o[:n1]))
    r_o, r_g, r_1 = n_o / t_o, n_g / t_g, n_1 / t_1
    print(f"identical tokens, step decoder vs generate (batch {len(ps)}): {same}/{len(ps)} prompts")
    print(f"identical tokens, step decoder batch 1 vs batch {len(ps)}: {same1}/{n1} prompts")
    print(f"generate      batch {len(ps):3d}: {n_g:6d} tokens in {t_g:7.1f} s = {r_g:7.1f} tok/s")
    print(f"step decoder  batch {len(ps):3d}: {n_o:6d} tokens in {t_o:7.1f} s = {r_o:7.1f} tok/s")
    print(f"step decoder  batch   1: {n_1:6d} tokens in {t_1:7.1f} s = {r_1:7.1f} tok/s")
    print(f"ratio ours/generate at batch {len(ps)}: {r_o / r_g:.2f}  (target >= 1.0)")
    print(f"ratio batch {len(ps)}/batch 1 (ours): {r_o / r_1:.2f}  (target >= 6)")
    ok = same == len(ps) and r_o >= r_g and r_o >= 6 * r_1
    print("PASS" if ok else "FAIL (see lines above)")
    return 0 if same == len(ps) else 1


if __name__ == "__main__":
    sys.exit(main())
