"""The positive control through the identical pipeline at the paper's size (Section 7.2).

``owmi known-positive --check`` takes the adapter the known positive trained and runs it through
``owmi run`` like any model, as the spec ``BASE+peft:ADAPTER`` (``models/adapter.py``), beside the
unadapted base in the same spec: ``replace`` at token positions 0 to 2 of the residual stream after
the trained layer, Track A, the detection probe, hook scope ``lifted``, paired intervention and sham
runs, once per read-out. What ``replace`` writes is a held-out direction per unit
(``OwmiSpec.replace_directions``): the seeded unit direction ``heldout_seeds[0] + k`` scaled to the
norm of the engine's reference, built exactly as the training references were, and the range is
checked disjoint from the directions training used (:func:`check_disjoint`) before any run. The
units are the ``anchor`` benchmark's items x two seeds, one direction each: the full preset's 100
held-out directions give 100 intervention and 100 sham records per model and read-out, as the
paper's known positive (trained on 400 directions, scored on 100).

Nothing here scores on its own: the runs are scored by ``owmi score``'s code (``profile.score_runs``),
and each row is a detection cell of it, judged by the statistic the claims use: AUROC with its
item-clustered interval, d', the margin over sham (hit rate minus false-alarm rate), hits and false
alarms out of the complete pairs. The unadapted model's AUROC is the leakage floor: what the
pipeline reads from the intervention without any trained report (token-level sensitivity).

Pass rule per read-out (:data:`PASS_RULE`): at least the paper's 100 complete pairs, at least 95%
hits and at most 5% false alarms, and the AUROC interval's lower bound above 0.9, for the adapted
model. The result of each read-out is stored in the anchor run as a ``known_positive_check`` row,
which the claims' known-positive condition reads for cells of the same model, site and read-out
(``claims.known_positive_condition``).
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.owmi.score.positive import (CHECK_KIND, CHECK_SEEDS, DECIDING_READOUT, PASS_RULE, anchor_rows,
                                              floor_lines, rows_of, table_lines, verdicts)



def check_disjoint(trained: list[int], directions: tuple[int, int]) -> None:
    """Refuse held-out directions that training used (one line naming them)."""
    lo, hi = directions
    overlap = sorted(s for s in set(trained) if lo <= s <= hi)
    if overlap:
        raise UserError(f"known-positive --check: held-out directions {lo}..{hi} include {len(overlap)} trained on "
                        f"(first {overlap[:5]}); refusing to score")


def check_spec(adapter_dir: Path, base: str, layer: int, readout: str, *, directions: tuple[int, int],
               seeds: tuple[int, ...] = CHECK_SEEDS, probe_tokens: int = 24):
    """The ``owmi run`` spec of the check: adapted model and its base, Section 7.2's intervention,
    one held-out direction per (anchor item, seed)."""
    from tamperbench.owmi.run.anchor_items import ANCHOR_BENCHMARK
    from tamperbench.owmi.run.spec import OwmiSpec

    n_dirs = directions[1] - directions[0] + 1
    items = n_dirs // len(seeds)
    if items < 1:
        raise UserError(f"--heldout-seeds: {n_dirs} held-out directions; the check needs one per unit, at least "
                        f"{len(seeds)} ({len(seeds)} seeds)")
    data = dict(models=[f"{base}+peft:{Path(adapter_dir).resolve()}", base], benchmarks=[ANCHOR_BENCHMARK],
                objects=[{"kind": "resid_post", "layer": layer}], operators=[{"name": "replace", "dose": 1.0}],
                replace_directions=list(directions), positions="0,1,2", probes=["detection"], tracks=["A"],
                scopes=["lifted"], conditions=["intervention", "sham"], items_per_benchmark=items, seeds=list(seeds),
                observer_classifier=False, task_max_new_tokens=1, probe_max_new_tokens=probe_tokens, readout=readout)
    spec = OwmiSpec.model_validate(data)
    from tamperbench.owmi.run.runner import check_readout

    check_readout(spec)  # constrained without llguidance: one line now, not after training
    return spec


def run_check(out: Path, *, base: str, anchor: dict, readouts: tuple[str, ...], directions: tuple[int, int],
              probe_tokens: int, n_boot: int, console: Console, strict: bool = True, spec=None) -> dict:
    """Run the adapted model and its base through ``owmi run`` once per read-out, score, print, save.

    Every read-out's spec is built before any run: one this build cannot run is refused first
    (``strict``, read-outs the user named) or skipped with its reason printed (the default set)."""
    import json
    import time

    from tamperbench.safeio.files import atomic_write
    from tamperbench.owmi.run.anchor_items import anchor_items
    from tamperbench.owmi.score.profile import score_runs
    from tamperbench.owmi.controls.prompts import anchor_prompts
    from tamperbench.owmi.run.runner import run

    layer, trained = int(anchor["layer"]), list(anchor["training"]["trained_seeds"])
    check_disjoint(trained, directions)
    adapter = Path(out) / "adapter"
    err = Console(stderr=True)
    specs = []
    for readout in readouts:
        try:
            specs.append((readout, check_spec(adapter, base, layer, readout, directions=directions,
                                              probe_tokens=probe_tokens)))
        except UserError as why:
            if strict:
                raise
            err.print(f"read-out {readout} skipped: {why}", markup=False)
    if not specs:
        raise UserError(f"--readout: none of {', '.join(readouts)} can run in this build")
    run_dirs, times, written = [], {}, {}
    for readout, rspec in specs:
        run_dir = Path(out) / f"run-{readout}"
        rep = run(rspec, run_dir, console=err)
        times[readout], written[readout] = round(rep.seconds, 1), rep.written
        err.print(f"{readout}: {rep.written} records written, {rep.skipped_units} of {rep.units} units stored, "
                  f"{rep.seconds:.1f}s -> {run_dir}")
        run_dirs.append(run_dir)
    t = time.perf_counter()
    result = score_runs(run_dirs, n_boot=n_boot, seed=0, dose_boot=0)
    times["score"] = round(time.perf_counter() - t, 1)
    rows = rows_of(result, rspec.models[0])
    v = verdicts(rows)
    items = anchor_items(rspec.items_per_benchmark)
    pool = {q for _, q in anchor_prompts(400, int((anchor.get("spec") or {}).get("item_seed", 1)))}
    shared = sum(it.question in pool for it in items)
    lines = [f"Known positive through `owmi run` and `owmi score` (replace at positions 0-2 of resid_post.{layer}, "
             f"Track A, detection, scope lifted): {len(items)} anchor items x seeds {list(CHECK_SEEDS)}, one held-out "
             f"direction each (seeds {directions[0]}..{directions[1]}; training used {min(trained)}..{max(trained)}: "
             f"disjoint); {shared} of the {len(items)} item texts also occur in the training prompt pool (the held-out "
             "axis is the direction, as in the source).", "", *table_lines(rows), "", *floor_lines(v), "",
             *[d["line"] for d in v.values()]]
    for text in lines:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    anchors = anchor_rows(v, base=base, layer=layer, directions=directions, trained=trained,
                          runs=[str(d) for d in run_dirs])
    if spec is not None:
        from tamperbench.owmi.score.anchor_store import save_anchor_rows

        save_anchor_rows(out, spec, CHECK_KIND, anchors)
    deciding = v.get(DECIDING_READOUT, {})
    summary = {"passes": bool(deciding.get("passes")), "deciding_readout": DECIDING_READOUT, "pass_rule": PASS_RULE,
               "rows": rows, "readouts": {k: {"passes": d["passes"], "why": d["why"]} for k, d in v.items()},
               "runs": [str(d) for d in run_dirs], "layer": layer, "directions": list(directions),
               "trained_directions": [min(trained), max(trained)], "items": len(items), "seeds": list(CHECK_SEEDS),
               "item_texts_in_training_pool": shared,
               # this process's: a check resumed after its runs finished writes 0 records in a second or two
               "seconds": times, "records_written": written}
    atomic_write(Path(out) / "known_positive_check.json", json.dumps(summary, indent=1))
    atomic_write(Path(out) / "known_positive_check.md", "\n".join(lines) + "\n")
    return summary
