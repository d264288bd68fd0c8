"""Exact Words generation with and without prefix reuse, same prompts, one process.

Usage:
    .venv/bin/python benchmarks/quote_throughput.py                       # both presets, in full
    .venv/bin/python benchmarks/quote_throughput.py --items 8 --max-new-tokens 16 --preset standard
    .venv/bin/python benchmarks/quote_throughput.py --preset depth --max-new-tokens 8 --alone-prompts 16
    .venv/bin/python benchmarks/quote_throughput.py --items 2 --max-new-tokens 4 --preset standard --rounds 3

WHY: every Exact Words prompt is the chat template's system prompt, then a document, then one
instruction; a document's 3 to 4 items and both arms share it, and the ``depth`` preset puts the
same ~3,000-token fused document before all of its 74 prompts. With prefix reuse
(models/prefix_share.py) each shared prefix is prefilled once per generation call.

Both modes run the production path (``generate_chat`` on the prompts the quote runner builds, in
the runner's order and generation calls: runner.generation_calls keeps a document's trials in one
call), greedy; the rows decoded at once are what memory allows for the call's longest prompt
(models/memory.py), up to the call's prompts (runner.call_size without ``--batch-size``; with it, at
most that many, as the runner does), the same in both modes. The benchmark checks the answers are token for token
identical, prints wall time, prefill tokens fed, rows, peak resident memory and the ratio, timed by
benchmarks/_harness.py (one thread unless ``--threads``; ``--rounds`` rotated rounds, medians, the
ratio as the median of per-round ratios, load average and machine).
Targets: standard >= 3x, depth >= 8x, in full presets with the default 96 new tokens.
``--items N`` takes the first N items (both arms); the ratio then understates the full preset's
(fewer prompts share each prefix). ``--alone-prompts N`` runs the whole preset with reuse but the
no-reuse baseline on its first N prompts only (the depth baseline prefills 74 x ~3,200 tokens, about
an hour on one thread): it prints the ratio measured on those N prompts and, labelled EXTRAPOLATED,
the whole preset's from the baseline's seconds a prompt.

With reuse under cascade attention the prefill is a prefix tree (models/prefix_tree.py): the system
prompt every document starts with is fed once a call, and an item's instruction, which both arms
repeat word for word, once per item; every document's branches and tails go through common forwards
whose rows read their document's keys once a layer (decoding/cascade_prefill.py). Both modes decode
without per-token statistics (entropies, top-k), which generate_chat never returns
(StepDecoder.per_token_stats); the lines name each mode's attention (``sdpa``: transformers' own).

Shared-prefix attention (models/decoding/cascade.py): with reuse, rows of one shared prefix read
its keys once a step (``cascade``, the default) or each hold a copy of it (``copy``, the path before
cascade attention; TAMPERBENCH_SHARED_PREFIX_ATTENTION=copy). ``--attention both`` runs the reuse
mode under each path in the same process (both checked against the no-reuse answers); the shared
lines name the path that ran and how many rows and groups decoded with cascade attention.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from _harness import Arm, compare, parser, report, single_thread

single_thread()  # before torch starts its pools (--threads changes it after parsing)
os.environ.setdefault("TAMPERBENCH_HOME", str(Path(__file__).resolve().parents[1] / ".tb_home"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def planned_calls(preset: str, n_items: int | None, backend, batch_size: int | None = None
                  ) -> tuple[list[list[str]], bool]:
    """The quote runner's prompts for both arms in its plan order (sorted by prompt text), cut into
    its generation calls (runner.call_size and generation_calls: a document's trials share a call),
    and whether the runner decodes a call's rows as memory allows (no ``--batch-size``)."""
    from tamperbench.quote.items import load_items
    from tamperbench.quote.runner import QuoteRunSpec, build_trials, call_size, generation_calls

    ids = [it.id for it in load_items(preset)][: n_items or None]
    trials = sorted(build_trials(QuoteRunSpec(preset=preset, item_ids=ids)), key=lambda t: t.prompt)
    bs, keep, by_memory = call_size(backend, batch_size)
    return [[t.prompt for t in call] for call in generation_calls(trials, bs, keep_documents=keep)], by_memory


class PeakRSS:
    """Peak resident memory of this process while the block runs (sampled every 50 ms)."""

    def __enter__(self):
        import threading

        import psutil

        self._proc, self._stop, self.peak = psutil.Process(), threading.Event(), 0
        self.start = self._proc.memory_info().rss

        def watch():
            while not self._stop.is_set():
                self.peak = max(self.peak, self._proc.memory_info().rss)
                self._stop.wait(0.05)

        self._t = threading.Thread(target=watch, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


ATTENTION_ENV = "TAMPERBENCH_SHARED_PREFIX_ATTENTION"


BY_MEMORY = True  # as the runner decides (planned_calls): a call's rows as memory allows


def generate(backend, calls: list[list[str]], *, max_new_tokens: int, share: bool,
             attention: str | None = None) -> tuple[list, float, dict, int]:
    """One generate_chat per planned call; returns generations, seconds, summed stats, peak RSS bytes.
    ``attention``: the shared-prefix attention path for this run (cascade or copy; None: as set).
    Rows: as the quote runner sizes them (``BY_MEMORY``), the same in both modes."""
    from contextlib import nullcontext


    gens, stats = [], {}
    old = os.environ.get(ATTENTION_ENV)
    if attention is not None:
        os.environ[ATTENTION_ENV] = attention
    try:
        with PeakRSS() as mem:
            t0, c0 = time.perf_counter(), time.process_time()
            for call in calls:
                convs = [[{"role": "user", "content": p}] for p in call]
                with backend.rows_from_memory() if BY_MEMORY else nullcontext():
                    gens += backend.generate_chat(convs, max_new_tokens=max_new_tokens, progress=False,
                                                  share_prefix=share)
                for k, v in backend.generation_stats.items():
                    if isinstance(v, str):  # the attention path: every call's, joined
                        stats[k] = "+".join(sorted(set(stats.get(k, v).split("+")) | {v}))
                    else:
                        stats[k] = max(stats.get(k, 0), v) if k == "batch_rows" else stats.get(k, 0) + v
            seconds = time.perf_counter() - t0
            stats["cpu_seconds"] = time.process_time() - c0  # this process's CPU time: less sensitive to load
            stats["attn_implementation"] = backend.model.config._attn_implementation  # the rows' own attention
    finally:
        if attention is not None:
            os.environ.pop(ATTENTION_ENV) if old is None else os.environ.__setitem__(ATTENTION_ENV, old)
    return gens, seconds, stats, mem.peak


def _line(name: str, n: int, t: float, st: dict, peak: int) -> str:
    path = f"; attention {st.get('attn_implementation', '?')} (no shared prefix)"
    if st.get("shared_groups"):
        path = (f"; attention {st.get('shared_prefix_attention', '?')} ({st.get('cascade_rows', 0)} rows in "
                f"{st.get('cascade_groups', 0)} groups)")
    return (f"  {name}: {n:3d} prompts {t:7.1f} s ({t / n:5.2f} s a prompt); prefill {st['prefill_tokens']:6d} tokens "
            f"in {st['prefill_seconds']:6.1f} s, decode {st['decode_tokens']:5d} tokens in {st['decode_seconds']:6.1f} s; "
            f"rows {st['batch_rows']}; peak RSS {peak / 2**30:.1f} GB; CPU {st.get('cpu_seconds', 0):.1f} s{path}")


def bench(backend, preset: str, n_items: int | None, max_new_tokens: int, rounds: int = 1,
          alone_prompts: int | None = None, attention: str | None = None, no_alone: bool = False,
          batch_size: int | None = None) -> tuple[float, bool]:
    global BY_MEMORY
    calls, BY_MEMORY = planned_calls(preset, n_items, backend, batch_size)
    n = sum(map(len, calls))
    rows = "rows as memory allows" if BY_MEMORY else f"batch cap {backend.max_batch_size}"
    print(f"[{preset}] {n} prompts ({n_items or 'all'} items x 2 arms) in {len(calls)} generation calls "
          f"({'+'.join(str(len(c)) for c in calls)}), {max_new_tokens} new tokens, {rows}, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    paths = ["cascade", "copy"] if attention == "both" else [attention]
    if alone_prompts and alone_prompts < n:
        return bench_subset(backend, preset, calls, max_new_tokens, alone_prompts, paths[0])
    runs = []
    if no_alone:  # reuse runs only: one per attention path, compared with each other
        for p in paths:
            runs.append(generate(backend, calls, max_new_tokens=max_new_tokens, share=True, attention=p))
            print(_line("shared", n, *[runs[-1][k] for k in (1, 2, 3)]), flush=True)
        if len(runs) == 1:
            print("  NO no-reuse baseline run, nothing compared", flush=True)
            return 0.0, True
        same = sum(a.token_ids == b.token_ids for a, b in zip(runs[0][0], runs[-1][0]))
        print(f"  identical answers across attention paths: {same}/{n}; seconds {' / '.join(paths)}: "
              f"{runs[0][1] / runs[-1][1]:.2f}x the last; NO no-reuse baseline run", flush=True)
        return 0.0, same == n
    got: dict[str, tuple] = {}

    def arm(name: str, share: bool, attention_path: str | None) -> Arm:
        def run() -> int:
            got[name] = generate(backend, calls, max_new_tokens=max_new_tokens, share=share, attention=attention_path)
            return n
        return Arm(name, run)

    names = [f"shared ({p or 'as set'})" for p in paths]
    result = compare([arm("alone", False, None), *(arm(nm, True, p) for nm, p in zip(names, paths))], rounds=rounds,
                     warmup=False)
    report(result, unit="prompts")
    alone, t_a, st_a, m_a = got["alone"]  # the last round's run of each arm
    print(_line("alone ", n, t_a, st_a, m_a))
    target = {"standard": 3, "depth": 8}.get(preset)
    ok, first = True, None
    for nm in names:
        shared, t_s, st_s, m_s = got[nm]
        same = sum(a.token_ids == b.token_ids for a, b in zip(alone, shared))
        ratio = result.ratio(nm)
        first = ratio if first is None else first
        ok = ok and same == n
        print(_line("shared", n, t_s, st_s, m_s))
        print(f"  identical answers: {same}/{n}")
        verdict = "" if target is None else f" (target >= {target}x: {'met' if ratio >= target else 'NOT met'})"
        print(f"  ratio alone/shared ({st_s.get('shared_prefix_attention', '?')} attention, median of per-round "
              f"ratios): {ratio:.2f}x{verdict}; in CPU time (last round) {st_a['cpu_seconds'] / st_s['cpu_seconds']:.2f}x; "
              f"prefill tokens {st_a['prefill_tokens'] / st_s['prefill_tokens']:.1f}x fewer", flush=True)
    return first or 0.0, ok


def bench_subset(backend, preset: str, calls: list[list[str]], max_new_tokens: int, k: int,
                 attention: str | None = None) -> tuple[float, bool]:
    """The whole preset with reuse; the no-reuse baseline on its first ``k`` prompts only (when the
    full baseline does not fit the time available), with reuse on the same ``k`` prompts too.

    Prints the measured ratio on the ``k`` prompts, and the full preset's ratio with the baseline
    EXTRAPOLATED from its seconds a prompt (every depth prompt has about the same length, and the
    baseline prefills each alone, so its time grows with the prompt count)."""
    n = sum(map(len, calls))
    sub = [[p for call in calls for p in call][:k]]
    shared, t_s, st_s, m_s = generate(backend, calls, max_new_tokens=max_new_tokens, share=True, attention=attention)
    print(_line("shared, all   ", n, t_s, st_s, m_s), flush=True)
    sub_shared, t_ks, st_ks, m_ks = generate(backend, sub, max_new_tokens=max_new_tokens, share=True,
                                             attention=attention)
    print(_line(f"shared, first {k}", k, t_ks, st_ks, m_ks), flush=True)
    alone, t_ka, st_ka, m_ka = generate(backend, sub, max_new_tokens=max_new_tokens, share=False)
    print(_line(f"alone, first {k} ", k, t_ka, st_ka, m_ka), flush=True)
    same = sum(a.token_ids == b.token_ids for a, b in zip(alone, shared[:k]))
    same_sub = sum(a.token_ids == b.token_ids for a, b in zip(alone, sub_shared))
    print(f"  identical answers, alone vs shared (whole-preset call): {same}/{k}; vs shared (same {k}): {same_sub}/{k}")
    print(f"  MEASURED ratio on the first {k} prompts: {t_ka / t_ks:.2f}x; prefill tokens "
          f"{st_ka['prefill_tokens'] / st_ks['prefill_tokens']:.1f}x fewer")
    t_full = t_ka / k * n
    target = {"standard": 3, "depth": 8}.get(preset)
    ratio = t_full / t_s
    verdict = "" if target is None else f" (target >= {target}x: {'met' if ratio >= target else 'NOT met'})"
    print(f"  EXTRAPOLATED whole-preset ratio: baseline {t_ka / k:.1f} s a prompt x {n} = {t_full:.0f} s (not run) "
          f"/ shared {t_s:.1f} s (run) = {ratio:.2f}x{verdict}; load average {os.getloadavg()[0]:.1f}", flush=True)
    return ratio, same == k == same_sub


def main() -> int:
    ap = parser(__doc__, rounds=1)
    ap.add_argument("--preset", choices=["standard", "depth", "both"], default="both")
    ap.add_argument("--items", type=int, default=None, help="first N items of the preset (default: all)")
    ap.add_argument("--depth-items", type=int, default=None, help="first N items of depth (default: --items)")
    ap.add_argument("--max-new-tokens", type=int, default=96, help="the quote runner's default is 96")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="as the runner's --batch-size: calls of about this many trials, at most this many rows "
                         "(default: the runner's rule without it, a call's rows as memory allows)")
    ap.add_argument("--attention", choices=["cascade", "copy", "both"], default=None,
                    help="shared-prefix attention of the reuse run (default: as TAMPERBENCH_SHARED_PREFIX_ATTENTION "
                         "says, cascade if unset); both: one reuse run each")
    ap.add_argument("--no-alone", action="store_true",
                    help="skip the no-reuse baseline: only the reuse runs of --attention, checked against each other")
    ap.add_argument("--alone-prompts", type=int, default=None,
                    help="run the no-reuse baseline on the first N prompts only and extrapolate (labelled)")
    args = ap.parse_args()
    single_thread(args.threads)

    from tamperbench.models import load_backend

    backend = load_backend("embedded", device="cpu", batch_size=args.batch_size)
    backend.generate_chat([[{"role": "user", "content": "Hello."}]] * 2, max_new_tokens=2, progress=False)  # warm-up
    ok = True
    presets = ["standard", "depth"] if args.preset == "both" else [args.preset]
    for preset in presets:
        n = args.depth_items if preset == "depth" and args.depth_items else args.items
        _, same = bench(backend, preset, n, args.max_new_tokens, args.rounds, args.alone_prompts, args.attention,
                        args.no_alone, args.batch_size)
        ok = ok and same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
