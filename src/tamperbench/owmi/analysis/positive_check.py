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

READOUTS = ("generated", "constrained", "choice")
DECIDING_READOUT = "choice"
CHECK_KIND = "known_positive_check"
CHECK_SEEDS = (0, 1)
PAPER_PAIRS, HIT_MIN, FALSE_ALARM_MAX, AUROC_LOWER_MIN = 100, 0.95, 0.05, 0.9
PASS_RULE = (f"adapted model: >= {PAPER_PAIRS} complete pairs (the paper's size), hit rate >= {HIT_MIN:.2f}, "
             f"false-alarm rate <= {FALSE_ALARM_MAX:.2f}, AUROC interval lower bound > {AUROC_LOWER_MIN}")
ADAPTED, BASE = "adapted (known positive)", "unadapted base (leakage floor)"


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
    from tamperbench.owmi.anchor_items import ANCHOR_BENCHMARK
    from tamperbench.owmi.spec import OwmiSpec

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
    from tamperbench.owmi.validate import check_readout

    check_readout(spec)  # constrained without llguidance: one line now, not after training
    return spec


def rows_of(result: dict, adapted: str) -> list[dict]:
    """The detection cells of a score result, one flat row per (model, read-out)."""
    out = []
    for c in result["cells"]:
        if c["cell"]["probe_family"] != "detection":
            continue
        comp = c["detection"]["complete"]
        rates = c["detection"]["parse_rates"]
        model, n = c["cell"]["model"], comp["pairs"]
        out.append({"model": model, "role": ADAPTED if model == adapted else BASE,
                    "readout": c["cell"].get("readout", "generated"), "site": c["cell"]["site"],
                    "identity": {k: c["cell"].get(k) for k in ("model_revision", "dtype", "quantized")},
                    "pairs": n, "items": comp["items"], "parsed": sum(r["parsed"] for r in rates),
                    "attempted": sum(r["attempted"] for r in rates),
                    "hits": round(comp["hit_rate"] * n) if n else 0,
                    "false_alarms": round(comp["false_alarm_rate"] * n) if n else 0,
                    "hit_rate": comp["hit_rate"], "false_alarm_rate": comp["false_alarm_rate"],
                    "margin": comp["margin"], "margin_ci": comp["margin_ci"], "dprime": comp["dprime"],
                    "dprime_ci": comp["dprime_ci"], "auroc": comp["auroc"], "auroc_ci": comp["auroc_ci"]})
    return sorted(out, key=lambda r: (READOUTS.index(r["readout"]) if r["readout"] in READOUTS else 9, r["role"]))


def passes(row: dict | None) -> tuple[bool, str]:
    """The adapted row against :data:`PASS_RULE`, with the first reason it fails."""
    if row is None or not row["pairs"]:
        return False, "no complete pair"
    why = [w for ok, w in (
        (row["pairs"] >= PAPER_PAIRS, f"{row['pairs']} complete pairs, below the paper's {PAPER_PAIRS}"),
        (row["hit_rate"] >= HIT_MIN, f"hits {row['hits']}/{row['pairs']} below {HIT_MIN:.0%}"),
        (row["false_alarm_rate"] <= FALSE_ALARM_MAX, f"false alarms {row['false_alarms']}/{row['pairs']} above "
         f"{FALSE_ALARM_MAX:.0%}"),
        (row["auroc_ci"][0] > AUROC_LOWER_MIN, f"AUROC lower bound {row['auroc_ci'][0]:.3f} not above {AUROC_LOWER_MIN}"),
    ) if not ok]
    return (not why), ("; ".join(why) if why else "meets the rule")


def verdicts(rows: list[dict]) -> dict[str, dict]:
    """Per read-out: the adapted row, the base row (leakage floor) and the pass decision."""
    out: dict[str, dict] = {}
    for r in rows:
        out.setdefault(r["readout"], {})["adapted" if r["role"] == ADAPTED else "base"] = r
    for readout, v in out.items():
        ok, why = passes(v.get("adapted"))
        v.update(passes=ok, why=why, line=f"{readout}: {'PASS' if ok else 'FAIL'} ({why}; rule: {PASS_RULE})")
    return out


def _ci(x: float | None, ci: list[float] | None, f: str = ".3f") -> str:
    return "n/a" if x is None or ci is None else f"{x:{f}} [{ci[0]:{f}}, {ci[1]:{f}}]"


def table_lines(rows: list[dict]) -> list[str]:
    """Markdown table of the check (the same in the terminal, ``known_positive_check.md`` and the site)."""
    lines = ["| model | read-out | pairs (items) | hits | false alarms | AUROC [95% CI] | d' [95% CI] | "
             "margin over sham [95% CI] |", "|" + "---|" * 8]
    for r in rows:
        n = r["pairs"]
        lines.append(f"| {r['role']}: `{r['model']}` | {r['readout']} | {n} ({r['items']}) | {r['hits']}/{n} | "
                     f"{r['false_alarms']}/{n} | {_ci(r['auroc'] if n else None, r['auroc_ci'])} | "
                     f"{_ci(r['dprime'] if n else None, r['dprime_ci'], '.2f')} | "
                     f"{_ci(r['margin'] if n else None, r['margin_ci'], '+.3f')} |")
    return lines


def floor_lines(v: dict[str, dict]) -> list[str]:
    out = []
    for readout, d in v.items():
        b = d.get("base")
        if b is not None and b["pairs"]:
            out.append(f"leakage floor ({readout}): the unadapted model's AUROC {_ci(b['auroc'], b['auroc_ci'])} "
                       f"(hits {b['hits']}/{b['pairs']}, false alarms {b['false_alarms']}/{b['pairs']}): what the "
                       "pipeline reads from the intervention with no trained report")
    return out


def anchor_rows(v: dict[str, dict], *, base: str, layer: int, directions: tuple[int, int], trained: list[int],
                runs: list[str]) -> list[dict]:
    """One ``known_positive_check`` anchor per read-out with both models' rows (what the claims read)."""
    out = []
    for readout, d in v.items():
        b, a = d.get("base"), d.get("adapted")
        ident = (b or a or {}).get("identity", {})
        out.append({"kind": CHECK_KIND, "model": base, **ident, "site": (b or a or {}).get("site", f"resid_post.{layer}"),
                    "layer": layer, "readout": readout, "passes": d["passes"], "why": d["why"], "pass_rule": PASS_RULE,
                    "adapted": a, "base": b,
                    "leakage_floor": None if b is None else {"auroc": b["auroc"], "auroc_ci": b["auroc_ci"]},
                    "directions": list(directions), "trained_directions": [min(trained), max(trained)],
                    "disjoint": True, "runs": runs})
    return out


def run_check(out: Path, *, base: str, anchor: dict, readouts: tuple[str, ...], directions: tuple[int, int],
              probe_tokens: int, n_boot: int, console: Console, strict: bool = True, spec=None) -> dict:
    """Run the adapted model and its base through ``owmi run`` once per read-out, score, print, save.

    Every read-out's spec is built before any run: one this build cannot run is refused first
    (``strict``, read-outs the user named) or skipped with its reason printed (the default set)."""
    import json
    import time

    from tamperbench.fsio import atomic_write
    from tamperbench.owmi.anchor_items import anchor_items
    from tamperbench.owmi.analysis.profile import score_runs
    from tamperbench.owmi.analysis.prompts import anchor_prompts
    from tamperbench.owmi.runner import run

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
    run_dirs, times = [], {}
    for readout, rspec in specs:
        run_dir = Path(out) / f"run-{readout}"
        rep = run(rspec, run_dir, console=err)
        times[readout] = round(rep.seconds, 1)
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
        from tamperbench.owmi.analysis.anchor_store import save_anchor_rows

        save_anchor_rows(out, spec, CHECK_KIND, anchors)
    deciding = v.get(DECIDING_READOUT, {})
    summary = {"passes": bool(deciding.get("passes")), "deciding_readout": DECIDING_READOUT, "pass_rule": PASS_RULE,
               "rows": rows, "readouts": {k: {"passes": d["passes"], "why": d["why"]} for k, d in v.items()},
               "runs": [str(d) for d in run_dirs], "layer": layer, "directions": list(directions),
               "trained_directions": [min(trained), max(trained)], "items": len(items), "seeds": list(CHECK_SEEDS),
               "item_texts_in_training_pool": shared, "seconds": times}
    atomic_write(Path(out) / "known_positive_check.json", json.dumps(summary, indent=1))
    atomic_write(Path(out) / "known_positive_check.md", "\n".join(lines) + "\n")
    return summary
