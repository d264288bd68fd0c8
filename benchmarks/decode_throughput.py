"""Our step decoder vs transformers' own ``generate`` on the same prompts, in one process.

Checks that both emit identical greedy tokens, then prints tokens/s for each, their ratio, and
the step decoder at batch 64 vs batch 1 (timed by benchmarks/_harness.py: one thread unless
``--threads``, rotated rounds, medians, load average and machine). Targets: ours >= generate at batch 64;
batch 64 >= 6x the tokens/s of batch 1.

    .venv/bin/python benchmarks/decode_throughput.py            # 64 prompts x 64 new tokens
    .venv/bin/python benchmarks/decode_throughput.py --quick    # 64 prompts x 16 new tokens
    .venv/bin/python benchmarks/decode_throughput.py --quick --prompts 8 --rounds 1   # a smoke run

Tokens are counted per row up to and including EOS (both loops stop a row there).
"""

from __future__ import annotations

import sys
import time

from _harness import Arm, compare, parser, report, single_thread

single_thread()  # before torch starts its pools (--threads changes it after parsing)

import torch  # noqa: E402

from tamperbench.models import load_backend  # noqa: E402
from tamperbench.sleight.presets import protocol_questions  # noqa: E402


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
    ap = parser(__doc__, rounds=2)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=None)
    ap.add_argument("--batch1-prompts", type=int, default=None, help="prompts decoded one at a time (default 4)")
    args = ap.parse_args()
    single_thread(args.threads)
    new = args.new_tokens or (16 if args.quick else 64)
    n1 = args.batch1_prompts or (2 if args.quick else 4)
    be = load_backend("embedded", device="cpu")
    ps = prompts(be, args.prompts)
    print(f"{len(ps)} prompts, {new} new tokens, greedy; batch 1 on the first {n1}")
    tokens: dict[str, list[list[int]]] = {}

    def arm(name: str, fn, ps_: list[list[int]], batch: int):
        def run() -> int:
            tokens[name], _ = fn(be, ps_, new, batch)
            return sum(map(len, tokens[name]))
        return Arm(name, run)

    b = len(ps)
    result = compare([arm(f"generate batch {b}", hf_generate, ps, b), arm(f"step decoder batch {b}", ours, ps, b),
                      arm("step decoder batch 1", ours, ps[:n1], 1)], rounds=args.rounds)
    report(result, unit="tok")
    tok_g, tok_o, tok_1 = (tokens[a.name] for a in result.arms)
    same = sum(x == y for x, y in zip(tok_o, tok_g))
    same1 = sum(x == y for x, y in zip(tok_1, tok_o[:n1]))
    print(f"identical tokens, step decoder vs generate (batch {b}): {same}/{b} prompts")
    print(f"identical tokens, step decoder batch 1 vs batch {b}: {same1}/{n1} prompts")
    r_g, r_o, r_1 = (a.rate or 0.0 for a in result.arms)
    print(f"ratio ours/generate at batch {b} (tok/s): {r_o / r_g:.2f}  (target >= 1.0)")
    print(f"ratio batch {b}/batch 1 (ours, tok/s): {r_o / r_1:.2f}  (target >= 6)")
    ok = same == b and r_o >= r_g and r_o >= 6 * r_1
    print("PASS" if ok else "FAIL (see lines above)")
    return 0 if same == b else 1


if __name__ == "__main__":
    sys.exit(main())
