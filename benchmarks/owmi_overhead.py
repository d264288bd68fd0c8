"""OWMI instrument overhead on the embedded model (CPU unless --device says otherwise).

Prints two figures:

1. hooked vs unhooked forward pass over a 256-token prompt: the OWMI intervention hook (add a
   direction at the task positions of resid_post.12) and the sham hook (identity) against no
   hook, timed by benchmarks/_harness.py (one thread unless --threads; each round runs the three
   passes back to back, in an order rotated from round to round; load average and machine printed),
   and forms the ratios hooked/unhooked *within* the round; the figure is the median of
   those per-repeat ratios (with their interquartile range), so load from other processes, which
   drifts over seconds, hits numerator and denominator alike. Target: under 5% extra.
2. peak memory of the teacher-forced JS-divergence computation (owmi.forward.js_divergence:
   baseline and intervened passes streamed in position chunks over their KV caches) for 256- and
   2,048-token prompts, each in a fresh subprocess, RSS sampled every millisecond. Three
   measures, each with its 2048/256 ratio (target: within 20%, i.e. ratio <= 1.2):
   - whole-process peak RSS (weights, runtime and the computation);
   - increment above the weights: peak RSS minus the RSS after the model is loaded and warmed up;
   - the increment less the two KV caches (baseline and intervened pass, computed from the
     config: 2 passes x layers x 2 (K, V) x kv_heads x head_dim x tokens x 4 bytes). This is the
     part the chunking bounds (activations, attention, chunk x vocabulary log-probs and the JS
     terms); the KV caches grow linearly with the prompt and cannot be avoided by any exact
     computation short of recomputing the prefix at every position.

Usage:
  .venv/bin/python benchmarks/owmi_overhead.py             # 15 repeats; JS memory at 256 and 2048 tokens
  .venv/bin/python benchmarks/owmi_overhead.py --quick     # 5 repeats; JS memory at 256 and 1024 tokens
  options: --repeats N (rounds), --lengths 256,2048, --chunk 128, --device cpu|cuda, --threads N
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time

from _harness import Arm, compare, report, single_thread

single_thread()  # before torch starts its pools (--threads changes it after parsing)


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
    from tamperbench.owmi.engine.objects import ObjectSpec, resolve
    from tamperbench.owmi.engine.operators import Intervention

    b = load_backend("embedded", device=device)
    ids = torch.tensor([_prompt(b, 256)], device=b.device)
    target = resolve(b.model, ObjectSpec(kind="resid_post", layer=12))
    d = torch.nn.functional.normalize(torch.randn(target.dim), dim=0)
    positions = list(range(16, 200))

    def timed(make):
        def run() -> None:
            iv = make()  # the hook is built, installed and removed inside the timing, as the engine does per forward
            if b.device.type == "cuda":
                torch.cuda.synchronize()
            with torch.inference_mode(), (hooks(b.model, iv.hook_pairs()) if iv else _null()):
                b.model(input_ids=ids)
            if b.device.type == "cuda":
                torch.cuda.synchronize()
        return run

    kinds = {"none": lambda: None,
             "sham": lambda: Intervention(target, "add", 0.0, positions=positions, direction=d, identity=True),
             "add": lambda: Intervention(target, "add", 64.0, positions=positions, direction=d)}
    result = compare([Arm(k, timed(make)) for k, make in kinds.items()], rounds=repeats)
    report(result)
    times = {a.name: a.seconds for a in result.arms}
    ratios = {k: [x / n for x, n in zip(times[k], times["none"])] for k in ("sham", "add")}  # per round
    med = {k: statistics.median(v) for k, v in times.items()}

    def iqr(v):
        q = statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0]] * 3
        return q[0], q[2]

    return {"median_s": med,
            "extra_pct": {k: 100.0 * (statistics.median(v) - 1) for k, v in ratios.items()},
            "extra_iqr_pct": {k: tuple(100.0 * (x - 1) for x in iqr(v)) for k, v in ratios.items()}}


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def js_memory(n: int, device: str, chunk: int) -> dict:
    """Run in a fresh process: RSS (whole process, and above the loaded model) while computing JS
    over an n-token prompt; on CUDA the allocator's own peak as well."""
    import torch

    from tamperbench.models import load_backend
    from tamperbench.owmi.engine.forward import js_divergence
    from tamperbench.owmi.engine.objects import ObjectSpec, resolve
    from tamperbench.owmi.engine.operators import Intervention

    torch.set_num_threads(1)
    b = load_backend("embedded", device=device)
    target = resolve(b.model, ObjectSpec(kind="resid_post", layer=12))
    d = torch.nn.functional.normalize(torch.randn(target.dim), dim=0)
    warm = _prompt(b, 64)
    js_divergence(b.model, warm, 0, Intervention(target, "add", 64.0, positions=range(8), direction=d), chunk=chunk)
    ids = _prompt(b, n)
    base = _rss()
    peak = [base]
    stop = threading.Event()
    cuda = b.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        cuda_base = torch.cuda.memory_allocated()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.001)

    th = threading.Thread(target=sample)
    th.start()
    t = time.perf_counter()
    mean, mx, npos = js_divergence(b.model, ids, 0, Intervention(target, "add", 64.0, positions=range(8), direction=d),
                                   chunk=chunk)
    secs = time.perf_counter() - t
    stop.set()
    th.join()
    cfg = b.model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    per_pass = cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * head_dim * n * b.model.dtype.itemsize
    out = {"tokens": n, "chunk": chunk, "whole_peak_mb": peak[0] / 2**20, "weights_mb": base / 2**20,
           "increment_mb": (peak[0] - base) / 2**20, "kv_caches_mb": 2 * per_pass / 2**20,
           "vocab": cfg.vocab_size, "js_mean": mean, "positions": npos, "seconds": secs}
    if cuda:
        out["cuda_increment_mb"] = (torch.cuda.max_memory_allocated() - cuda_base) / 2**20
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (default 15; 5 with --quick)")
    ap.add_argument("--lengths", default=None, help="two prompt lengths, e.g. 256,2048 (default; 256,1024 with --quick)")
    ap.add_argument("--chunk", type=int, default=128, help="positions per chunk of the JS streaming")
    ap.add_argument("--quick", action="store_true", help="a smoke run: fewer repeats, shorter long prompt")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="threads (default 1)")
    ap.add_argument("--js-memory", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    single_thread(args.threads)
    if args.js_memory:
        print(json.dumps(js_memory(args.js_memory, args.device, args.chunk)))
        return
    repeats = args.repeats or (5 if args.quick else 15)
    lengths = [int(x) for x in (args.lengths or ("256,1024" if args.quick else "256,2048")).split(",")]
    fo = forward_overhead(args.device, repeats)
    m, e, q = fo["median_s"], fo["extra_pct"], fo["extra_iqr_pct"]
    print(f"forward pass, 256-token prompt, {repeats} rotated rounds (device {args.device}): median unhooked "
          f"{m['none'] * 1e3:.1f} ms; extra time, median of per-repeat ratios [IQR]: sham hook {e['sham']:+.1f}% "
          f"[{q['sham'][0]:+.1f}, {q['sham'][1]:+.1f}], intervention hook {e['add']:+.1f}% "
          f"[{q['add'][0]:+.1f}, {q['add'][1]:+.1f}]  [target < +5%]")
    mem = {}
    for n in lengths:
        out = subprocess.run([sys.executable, __file__, "--js-memory", str(n), "--device", args.device,
                              "--chunk", str(args.chunk)], capture_output=True, text=True, check=True)
        mem[n] = json.loads(out.stdout.strip().splitlines()[-1])
    lo, hi = (mem[n] for n in lengths)
    print(f"JS divergence peak memory ({lengths[0]} vs {lengths[1]} tokens; {args.chunk} positions x "
          f"{lo['vocab']} vocab per chunk; device {args.device}), ratio {lengths[1]}/{lengths[0]} [target <= 1.20]:")
    rows = [("whole-process peak RSS", "whole_peak_mb"), ("increment above the loaded model", "increment_mb")]
    for label, k in rows:
        print(f"  {label:<44} {lo[k]:8.1f} MB vs {hi[k]:8.1f} MB  ratio {hi[k] / lo[k]:.2f}")
    print(f"  {'  of which the two KV caches (linear in T)':<44} {lo['kv_caches_mb']:8.1f} MB vs "
          f"{hi['kv_caches_mb']:8.1f} MB")
    a, b = lo["increment_mb"] - lo["kv_caches_mb"], hi["increment_mb"] - hi["kv_caches_mb"]
    print(f"  {'  the rest (chunk-bounded)':<44} {a:8.1f} MB vs {b:8.1f} MB  ratio {b / a:.2f}")
    if "cuda_increment_mb" in lo:
        print(f"  {'CUDA allocator peak above the model':<44} {lo['cuda_increment_mb']:8.1f} MB vs "
              f"{hi['cuda_increment_mb']:8.1f} MB  ratio {hi['cuda_increment_mb'] / lo['cuda_increment_mb']:.2f}")
    print(f"  (RSS after loading the model: {lo['weights_mb']:.1f} MB; JS mean {lo['js_mean']:.4f} / {hi['js_mean']:.4f}; "
          f"{lo['seconds']:.1f} s / {hi['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
