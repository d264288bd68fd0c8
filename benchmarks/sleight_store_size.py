"""Store size per Sleight of Word trial: our DuckDB layout vs one JSON line per trial.

The baseline is what a naive logger writes: one JSON line per trial with the clean run's
answer and per-token values copied in. Ours stores the clean answer once per question and a
trial's arrays only from its first swap on. The target: ours <= 1/4 of the baseline.

Method: run the quick preset on the embedded model (real trials), then replicate its trials
(new keys, values jittered so DuckDB cannot deduplicate them) up to N trials in both layouts,
and compare bytes per trial.

    .venv/bin/python benchmarks/sleight_store_size.py [--trials 24000]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

from tamperbench.sleight.presets import build_spec
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE, SleightTrial, full_trace
from tamperbench.sleight.runner import run
from tamperbench.store import RunStore, trial_key


def jitter(values: list[float], rng: random.Random) -> list[float]:
    return [round(v + rng.uniform(-1e-3, 1e-3), 5) for v in values]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=24000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tb-size-"))
    spec = build_spec(model="embedded", preset="quick", device="cpu")
    run(spec, tmp / "run")
    rng = random.Random(0)
    with RunStore.open_existing(tmp / "run", read_only=True) as src:
        cleans = {c["key"]: c for c in src.rows(CLEAN_TABLE)}
        trials = src.rows(TRIALS_TABLE)
    copies, json_bytes = [], 0
    for i in range(args.trials):
        t = dict(trials[i % len(trials)])
        for f in ("surprisal", "entropy_full", "entropy_top20"):
            t[f] = jitter(t[f], rng)
        t["key"] = trial_key({"copy": i})
        copies.append(SleightTrial(**t))
        clean = cleans[t["clean_key"]]
        whole = full_trace(clean, t).model_dump(mode="json")
        naive = {**t, **whole, "clean": clean}  # the whole trial trace, plus the clean run copied in
        json_bytes += len(json.dumps(naive).encode()) + 1
    with RunStore.open(tmp / "copy", spec) as dst:
        dst.write(CLEAN_TABLE, [])
        for s in range(0, len(copies), 1000):
            dst.write(TRIALS_TABLE, copies[s:s + 1000])
        dst.con.execute("CHECKPOINT")
    ours = (tmp / "copy" / "records.duckdb").stat().st_size + sum(len(json.dumps(c)) for c in cleans.values())
    print(f"{args.trials} trials: ours {ours / args.trials:.0f} B/trial (DuckDB + the clean answers once), "
          f"JSON lines with the clean run copied in {json_bytes / args.trials:.0f} B/trial, "
          f"ratio {ours / json_bytes:.3f} (target <= 0.25)")


if __name__ == "__main__":
    main()
