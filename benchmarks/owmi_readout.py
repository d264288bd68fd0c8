"""The quick OWMI preset under the choice read-out against the generated one, in one process.

Why: the choice read-out (owmi/choice.py) decodes nothing -- it teacher-forces the answer's JSON prefix
and scores each probe's closed option set -- so it must cost less than decoding every probe answer.
This times ``owmi run`` (owmi.run.runner.run, the whole run: model load, baseline and effects, impact
matching, task answers of the delayed track, probes, observers, records) on the same spec under both
read-outs, alternating their order from repeat to repeat so that load from other processes, which
drifts over seconds, falls on both; it prints each run's seconds, the ratio choice / generated (the
median over repeats) and the tokens each decoded (RunReport.tokens: every probe answer and every
task answer; under choice only the task answers of the delayed track are decoded).

The quick preset can be trimmed for a shorter measurement (--items, --operators, --seeds keep the
first N of each); the trim is printed with the figures.

Usage:
  .venv/bin/python benchmarks/owmi_readout.py                       # the whole quick preset, 1 repeat
  .venv/bin/python benchmarks/owmi_readout.py --items 1 --operators 1 --seeds 1 --repeats 2
  options: --device cpu|cuda, --json (one JSON line instead of text)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def trimmed_spec(readout: str, items: int | None, operators: int | None, seeds: int | None, device: str):
    from tamperbench.owmi.run.spec import quick_spec

    full = quick_spec()
    over = {"readout": readout, "device": device}
    if items:
        over["items_per_benchmark"] = min(items, full.items_per_benchmark)
    if operators:
        over["operators"] = [o.model_dump(mode="json") for o in full.operators[:operators]]
    if seeds:
        over["seeds"] = list(full.seeds[:seeds])
    return quick_spec(**over)


def one_run(spec) -> dict:
    from rich.console import Console

    from tamperbench.owmi.run.runner import run

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        rep = run(spec, Path(tmp) / "run", console=Console(file=open("/dev/null", "w")))
        return {"seconds": time.perf_counter() - t, "tokens": rep.tokens, "records": rep.written}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=None, help="keep the first N items per benchmark")
    ap.add_argument("--operators", type=int, default=None, help="keep the first N (operator, dose) cells")
    ap.add_argument("--seeds", type=int, default=None, help="keep the first N seeds")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    specs = {ro: trimmed_spec(ro, a.items, a.operators, a.seeds, a.device) for ro in ("generated", "choice")}
    from tamperbench.models import load_backend

    load_backend("embedded", device=a.device)  # weights into the page cache before either timing
    runs: dict[str, list[dict]] = {"generated": [], "choice": []}
    for k in range(a.repeats):
        for ro in (("generated", "choice") if k % 2 == 0 else ("choice", "generated")):
            runs[ro].append(one_run(specs[ro]))
    s = specs["generated"]
    out = {
        "preset": "quick", "trim": {"items_per_benchmark": s.items_per_benchmark, "operators": len(s.operators),
                                    "seeds": len(s.seeds)},
        "repeats": a.repeats, "device": a.device,
        **{ro: {"seconds": [round(r["seconds"], 2) for r in rs], "tokens_decoded": rs[0]["tokens"],
                "records": rs[0]["records"]} for ro, rs in runs.items()},
        "ratio_choice_over_generated": statistics.median(
            c["seconds"] / g["seconds"] for c, g in zip(runs["choice"], runs["generated"])),
    }
    if a.json:
        print(json.dumps(out))
        return out
    print(f"owmi quick preset ({out['trim']['items_per_benchmark']} items/benchmark, {out['trim']['operators']} "
          f"operator cell(s), {out['trim']['seeds']} seed(s)), {a.repeats} repeat(s), device {a.device}")
    for ro in ("generated", "choice"):
        r = out[ro]
        print(f"  {ro:9s}: {statistics.median(r['seconds']):8.1f} s  (runs {r['seconds']}), "
              f"{r['tokens_decoded']} tokens decoded, {r['records']} records")
    print(f"  ratio choice / generated: {out['ratio_choice_over_generated']:.3f} (median over repeats)")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
