"""Clustered bootstrap speed: vectorised (index matrix + bincount + matrix products) vs a plain loop.

Usage: .venv/bin/python benchmarks/stats_speed.py [--pairs 11216] [--replicates 2000] [--per-item 8] [--rounds 3]

The workload is the source's pooled dose battery size (11,216 complete intervention-sham pairs,
Section 7.3) with 2,000 replicates, clustered on items (``--per-item`` pairs per item). Both
implementations draw the *same* cluster indices from the same seed, so the script also checks that
they return the same d' and AUROC intervals before printing the times and their ratio (timed by
benchmarks/_harness.py: one thread, rotated rounds, medians).
"""

from __future__ import annotations

from _harness import Arm, compare, parser, report, single_thread

single_thread()  # before numpy starts its BLAS pool

import numpy as np  # noqa: E402

from tamperbench.stats.bootstrap import detection_bootstrap, detection_bootstrap_loop  # noqa: E402


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--pairs", type=int, default=11216)
    ap.add_argument("--replicates", type=int, default=2000)
    ap.add_argument("--per-item", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    single_thread(args.threads)
    if args.quick:
        args.pairs, args.replicates = min(args.pairs, 2000), min(args.replicates, 200)
    rng = np.random.default_rng(args.seed)
    items = np.arange(args.pairs) // args.per_item
    y_int = (rng.random(args.pairs) < 0.30).astype(float)
    y_sham = (rng.random(args.pairs) < 0.30).astype(float)
    fast = detection_bootstrap(y_int, y_sham, items, n_boot=args.replicates, seed=args.seed)
    slow = detection_bootstrap_loop(y_int, y_sham, items, n_boot=args.replicates, seed=args.seed)
    same = (np.allclose(fast["dprime"]["ci"], slow["dprime"]["ci"], atol=1e-12)
            and np.allclose(fast["auroc"]["ci"], slow["auroc"]["ci"], atol=1e-12))
    print(f"pairs={args.pairs} items={int(items.max()) + 1} replicates={args.replicates}")
    print(f"d' = {fast['dprime']['estimate']:.4f}  95% CI [{fast['dprime']['ci'][0]:.4f}, {fast['dprime']['ci'][1]:.4f}]"
          f"  AUROC = {fast['auroc']['estimate']:.4f}  95% CI [{fast['auroc']['ci'][0]:.4f}, {fast['auroc']['ci'][1]:.4f}]"
          f"  identical intervals: {same}")

    def arm(fn):
        return lambda: (fn(y_int, y_sham, items, n_boot=args.replicates, seed=args.seed), args.replicates)[1]

    result = compare([Arm("plain Python loop", arm(detection_bootstrap_loop)), Arm("vectorised", arm(detection_bootstrap))],
                     rounds=args.rounds, warmup=False)
    report(result, unit="replicates")


if __name__ == "__main__":
    main()
