"""OWMI instrument overhead on the embedded model (CPU unless --device says otherwise).

Prints two figures:

1. hooked vs unhooked forward pass over a 256-token prompt (median of --repeats timed passes,
   interleaved so machine load hits both alike): the OWMI intervention hook (add a direction at
   the task positions of resid_post.12) and the sham hook (identity) against no hook.
   Target: under 5% extra.
2. peak memory of the teacher-forced JS-divergence computation (owmi.forward.js_divergence,
   chunked streaming) for 256- and 2,048-token prompts, each measured in a fresh subprocess as
   peak RSS minus the RSS before the call (sampled every millisecond). Target: within 20%.
   The KV cache the streaming holds grows with length (the model's own linear cost); its size
   is printed beside the figure so the reader can see what the difference is made of.

Usage: .venv/bin/python benchmarks/owmi_overhead.py [--repeats 15] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _prompt(backend, n: int) -> list[int]:
    words = ("the quick brown fox jumps over the lazy dog while the river runs to the sea " * 400).split()
    ids = backend.tokenizer(" ".join(words), add_special_tokens=False)["input_ids"]
    return ids[:n]


def forward_overhead(device: str, repeats: int) -> dict:
    import torch

    from tamperbench.models import load_backend
    from tamperbench.models.hooks import hooks
    from tamperbench.owmi.objects import ObjectSpec, resolve
    from tamperbench.owmi.operators import Intervention

    b = load_backend("embedded", device=device)
    ids = torch.tensor([_prompt(b, 256)], device=b.device)
    target = resolve(b.model, ObjectSpec(kind="resid_post", layer=12))
    d = torch.nn.functional.normalize(torch.randn(target.dim), dim=0)
    positions = list(range(16, 200))

    def timed(make):
        iv = make()
        with torch.inference_mode(), (hooks(b.model, iv.hook_pairs()) if iv else _null()):
            t = time.perf_counter()
            b.model(input_ids=ids)
            if b.device.type == "cuda":
                torch.cuda.synchronize()
            return time.perf_counter() - t

    kinds = {"none": lambda: None,
             "sham": lambda: Intervention(target, "add", 0.0, positions=positions, direction=d, identity=True),
             "add": lambda: Intervention(target, "add", 64.0, positions=positions, direction=d)}
    for k in kinds:  # warm-up
        timed(kinds[k])
    times = {k: [] for k in kinds}
    for _ in range(repeats):
        for k, make in kinds.items():
            times[k].append(timed(make))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"median_s": med, "extra_pct": {k: 100.0 * (med[k] / med["none"] - 1) for k in ("sham", "add")}}


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def js_memory(n: int, device: str) -> dict:
    """Run in a fresh process: peak RSS growth while computing JS over an n-token prompt."""
    import torch

    from tamperbench.models import load_backend
    from tamperbench.owmi.forward import js_divergence
    from tamperbench.owmi.objects import ObjectSpec, resolve
    from tamperbench.owmi.operators import Intervention

    torch.set_num_threads(1)
    b = load_backend("embedded", device=device)
    target = resolve(b.model, ObjectSpec(kind="resid_post", layer=12))
    d = torch.nn.functional.normalize(torch.randn(target.dim), dim=0)
    warm = _prompt(b, 64)
    js_divergence(b.model, warm, 0, Intervention(target, "add", 64.0, positions=range(8), direction=d))
    ids = _prompt(b, n)
    base = _rss()
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.001)

    th = threading.Thread(target=sample)
    th.start()
    t = time.perf_counter()
    mean, mx, npos = js_divergence(b.model, ids, 0, Intervention(target, "add", 64.0, positions=range(8), direction=d))
    secs = time.perf_counter() - t
    stop.set()
    th.join()
    cfg = b.model.config
    kv = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads) * n * 4
    return {"tokens": n, "peak_extra_mb": (peak[0] - base) / 2**20, "kv_cache_mb_per_pass": kv / 2**20,
            "vocab": cfg.vocab_size, "js_mean": mean, "positions": npos, "seconds": secs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--js-memory", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.js_memory:
        print(json.dumps(js_memory(args.js_memory, args.device)))
        return
    fo = forward_overhead(args.device, args.repeats)
    m = fo["median_s"]
    print(f"forward pass, 256-token prompt, median of {args.repeats} (device {args.device}): "
          f"unhooked {m['none'] * 1e3:.1f} ms, sham hook {m['sham'] * 1e3:.1f} ms ({fo['extra_pct']['sham']:+.1f}%), "
          f"intervention hook {m['add'] * 1e3:.1f} ms ({fo['extra_pct']['add']:+.1f}%)  [target < +5%]")
    mem = {}
    for n in (256, 2048):
        out = subprocess.run([sys.executable, __file__, "--js-memory", str(n), "--device", args.device],
                             capture_output=True, text=True, check=True)
        mem[n] = json.loads(out.stdout.strip().splitlines()[-1])
    a, b = mem[256]["peak_extra_mb"], mem[2048]["peak_extra_mb"]
    print(f"JS divergence peak memory (chunked, 128 positions x {mem[256]['vocab']} vocab per chunk): "
          f"256 tokens {a:.1f} MB, 2048 tokens {b:.1f} MB, ratio {b / a:.2f} [target within 20%]; "
          f"KV cache held per pass: {mem[256]['kv_cache_mb_per_pass']:.1f} MB vs {mem[2048]['kv_cache_mb_per_pass']:.1f} MB")


if __name__ == "__main__":
    main()
