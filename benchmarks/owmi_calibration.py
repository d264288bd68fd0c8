"""OWMI impact-matching calibration (Appendix C.2, Eq. 7): sequential vs batched, in one process.

What it measures: the bisection over the random direction's norm eta for every cell of the OWMI
quick preset (``owmi.spec.quick_spec``: 3 built-in items x 1 seed per cell), run twice on the same
prepared units -- ``calibration="sequential"`` (one teacher-forced forward per unit per eta, the
reference) and ``calibration="batched"`` (the cell's units as rows of one ragged forward per eta)
-- in an order alternated from repeat to repeat. It prints each path's median time, their ratio
(sequential / batched, median of the per-repeat ratios so load drifting over seconds hits both
alike), the largest differences between the two results (eta, achieved JS, every trace entry)
and the load average before and after. Unit preparation (baseline answer, treatment effect) is
outside the timing: it is the same for both paths.

Usage:
  .venv/bin/python benchmarks/owmi_calibration.py --threads 1            # 3 repeats
  options: --repeats N, --items N (units per cell), --device cpu|cuda
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--items", type=int, default=None, help="units per cell (default: the preset's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from tamperbench.models import load_backend
    from tamperbench.owmi.engine import Cell, Engine
    from tamperbench.owmi.keys import load_items
    from tamperbench.owmi.spec import quick_spec

    over = {"items_per_benchmark": args.items} if args.items else {}
    specs = {p: quick_spec(calibration=p, device=args.device, **over) for p in ("sequential", "batched")}
    spec = specs["batched"]
    load_before = _load()
    backend = load_backend("embedded", device=args.device)
    engines = {p: Engine(backend, s, []) for p, s in specs.items()}
    assert engines["batched"].calibration_path() == "batched", "this model cannot run the batched path"
    out = []
    for b in spec.benchmarks:
        items = load_items(b, spec.items_per_benchmark)
        for obj in spec.objects:
            for op in spec.operators:
                cell = Cell("embedded", b, obj, op)
                units = [engines["batched"].prepare(cell, it, i, s) for i, it in enumerate(items) for s in spec.seeds]
                times = {p: [] for p in engines}
                got = {}
                for r in range(args.repeats):
                    for p in (("sequential", "batched") if r % 2 == 0 else ("batched", "sequential")):
                        t = time.perf_counter()
                        got[p] = engines[p].calibrate(units)
                        times[p].append(time.perf_counter() - t)
                (es, ts, as_, trs), (eb, tb, ab, trb) = got["sequential"], got["batched"]
                ratios = [s / b for s, b in zip(times["sequential"], times["batched"])]
                out.append(dict(
                    cell=f"{b} {obj.label} {op.name}={op.dose}", units=len(units), evaluations=len(trs),
                    sequential_s=statistics.median(times["sequential"]), batched_s=statistics.median(times["batched"]),
                    ratio_median=statistics.median(ratios), ratios=[round(x, 3) for x in ratios],
                    eta_equal=es == eb, eta=[es, eb], achieved=[as_, ab], target_equal=ts == tb,
                    trace_etas_equal=[e for e, _ in trs] == [e for e, _ in trb],
                    max_abs_trace_js_diff=max(abs(x[1] - y[1]) for x, y in zip(trs, trb)),
                    max_rel_trace_js_diff=max(abs(x[1] - y[1]) / max(abs(x[1]), 1e-30) for x, y in zip(trs, trb))))
    print(json.dumps(dict(threads=args.threads, repeats=args.repeats, load_before=load_before, load_after=_load(),
                          cells=out), indent=2))


if __name__ == "__main__":
    main()
