"""OWMI impact-matching calibration (Appendix C.2, Eq. 7): sequential vs batched, in one process.

What it measures: the bisection over the random direction's norm eta for every cell of the OWMI
quick preset (``owmi.run.spec.quick_spec``: 3 built-in items x 1 seed per cell), run twice on the same
prepared units -- ``calibration="sequential"`` (one teacher-forced forward per unit per eta, the
reference) and ``calibration="batched"`` (the cell's units as rows of one ragged forward per eta)
-- timed by benchmarks/_harness.py (one thread, rounds in rotated order, medians, the ratio as the
median of per-round ratios so load drifting over seconds hits both alike, load average and machine).
It prints per cell the harness lines and, as JSON, the largest differences between the two results
(eta, achieved JS, every trace entry). Unit preparation (baseline answer, treatment effect) is
outside the timing: it is the same for both paths.

Usage:
  .venv/bin/python benchmarks/owmi_calibration.py                 # 3 rounds, one thread
  options: --rounds N, --items N (units per cell), --device cpu|cuda, --threads N
"""

from __future__ import annotations

import json

from _harness import Arm, compare, parser, report, single_thread

single_thread()  # before torch starts its pools


def _arm(engines: dict, path: str, units: list, got: dict) -> Arm:
    """One calibration path over the cell's prepared units; its result kept in ``got[path]``."""
    def run() -> None:
        got[path] = engines[path].calibrate(units)
    return Arm(path, run)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--items", type=int, default=None, help="units per cell (default: the preset's)")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    single_thread(args.threads)
    from tamperbench.models import load_backend
    from tamperbench.owmi.engine.batched import BatchedEngine as Engine
    from tamperbench.owmi.engine.unit import Cell
    from tamperbench.owmi.run.spec import load_items
    from tamperbench.owmi.run.spec import quick_spec

    over = {"items_per_benchmark": args.items} if args.items else {}
    specs = {p: quick_spec(calibration=p, device=args.device, **over) for p in ("sequential", "batched")}
    spec = specs["batched"]
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
                got: dict = {}

                name = f"{b} {obj.label} {op.name}={op.dose}"
                print(f"cell {name}: {len(units)} units")
                result = compare([_arm(engines, p, units, got) for p in ("sequential", "batched")], rounds=args.rounds,
                                 warmup=False)
                report(result)
                (es, ts, as_, trs), (eb, tb, ab, trb) = got["sequential"], got["batched"]
                out.append(dict(
                    cell=name, units=len(units), evaluations=len(trs), ratio_median=result.ratio("batched"),
                    eta_equal=es == eb, eta=[es, eb], achieved=[as_, ab], target_equal=ts == tb,
                    trace_etas_equal=[e for e, _ in trs] == [e for e, _ in trb],
                    max_abs_trace_js_diff=max(abs(x[1] - y[1]) for x, y in zip(trs, trb)),
                    max_rel_trace_js_diff=max(abs(x[1] - y[1]) / max(abs(x[1]), 1e-30) for x, y in zip(trs, trb))))
    print(json.dumps(dict(threads=args.threads, rounds=args.rounds, cells=out), indent=2))


if __name__ == "__main__":
    main()
