"""``owmi score`` on a quick-preset-shaped ``choice`` run: the vectorised macro-F1 bootstrap against the
per-replicate scikit-learn loop it replaced, in one process, with identical results required.

Why: the quick preset's 600 records took 155 s wall to score; a profile put nearly all of it in the
characterization cells' macro-F1 bootstrap (one ``sklearn.metrics.f1_score`` call per replicate, 2,000
replicates a cell). ``closedset._macro_f1_boot`` now computes every replicate from the replicate's
observation counts; ``closedset._macro_f1_boot_loop`` is the old path, kept as the reference. This
script scores the same run both ways (``profile.score_runs``, the whole score: every cell, BH, ladders,
variance, decay), alternating the order over repeats, prints the seconds and the ratio, and fails if
the two results differ in any number.

The run: ``--run DIR`` scores a stored run as it is. ``--shape-from DIR --out DIR2`` first writes a run of
the quick preset's shape (its 3 operator@dose groups x 2 hook scopes) from the records of one group in
DIR (e.g. a quick run stopped after its first group: 100 records -> 600).

Usage:
    .venv/bin/python benchmarks/owmi_score_speed.py --shape-from /tmp/verdicts-partial --out /tmp/verdicts-600
    .venv/bin/python benchmarks/owmi_score_speed.py --run /tmp/verdicts-600 --repeats 1
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

QUICK_GROUPS = [(op, dose, scope) for op, dose in (("add", 16.0), ("add", 64.0), ("scale", 0.5))
                for scope in ("active", "lifted")]


def shape(src: Path, dst: Path) -> int:
    from pydantic import BaseModel

    from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
    from tamperbench.store import RunStore
    from tamperbench.store.run_store import trial_key

    class Spec(BaseModel):
        name: str = "quick-shaped run for owmi_score_speed"

    s = RunStore.open_existing(src, read_only=True)
    rows = [{k: v for k, v in r.items() if k in OwmiRun.model_fields} for r in s.rows(RUNS_TABLE)]
    s.close()
    out = [OwmiRun(**{**r, "operator": op, "dose": dose, "hook_scope": scope, "key": trial_key([r["key"], op, dose, scope]),
                      "pair_id": f"{r['pair_id']}|{op}{dose}{scope}"}) for op, dose, scope in QUICK_GROUPS for r in rows]
    st = RunStore.open(dst, Spec())
    st.ensure_table(RUNS_TABLE, OwmiRun)
    st.write(RUNS_TABLE, out)
    st.close()
    return len(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path)
    ap.add_argument("--shape-from", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--boot", type=int, default=2000)
    a = ap.parse_args()
    if a.shape_from:
        print(f"wrote {shape(a.shape_from, a.out)} records to {a.out}")
        return
    import json

    from tamperbench.owmi.score import closedset
    from tamperbench.owmi.score.profile import score_runs

    fast = closedset._macro_f1_boot
    score_runs([a.run], n_boot=10, dose_boot=2)  # imports and first calls outside the timings
    times: dict[str, list[float]] = {"vectorised": [], "loop": []}
    results = {}
    for rep in range(a.repeats):
        for name in (("vectorised", "loop") if rep % 2 == 0 else ("loop", "vectorised")):
            closedset._macro_f1_boot = fast if name == "vectorised" else closedset._macro_f1_boot_loop
            t = time.perf_counter()
            results[name] = json.dumps(score_runs([a.run], n_boot=a.boot, dose_boot=100), default=str, sort_keys=True)
            times[name].append(time.perf_counter() - t)
    closedset._macro_f1_boot = fast
    same = results["vectorised"] == results["loop"]
    v, lo = sorted(times["vectorised"])[len(times["vectorised"]) // 2], sorted(times["loop"])[len(times["loop"]) // 2]
    print(f"score_runs, {a.boot} replicates: loop {lo:.2f} s, vectorised {v:.2f} s = {lo / v:.1f}x; identical results: {same}")
    if not same:
        raise SystemExit("results differ")


if __name__ == "__main__":
    main()
