"""The positive control through the identical pipeline (Section 7.2; issue 26 item 3).

``owmi known-positive --check`` takes the adapter the known positive trained and runs it through
``owmi run`` like any model, as the spec ``BASE+peft:ADAPTER`` (``models/adapter.py``), beside the
unadapted base in the same spec: the replace intervention at token positions 0 to 2 of the residual
stream after the trained layer (Section 7.2), the detection probe in Track A, hook scope ``lifted``
(only positions 0 to 2 are altered, as in the source), paired intervention and sham runs on the
built-in items, once per read-out. Nothing here scores on its own: the runs are scored by
``owmi score``'s own code (``profile.score_runs``), and the table printed is its detection cells,
one row per model and read-out: the complete-pair margin over sham (hit rate minus false-alarm rate)
with its item-clustered bootstrap interval, the AUROC with its interval, and the parse rate.

The check passes when, under the ``choice`` read-out, the adapted model's margin interval lies above 0
(the instrument sees an effect that is there) and the unadapted model's interval contains 0 (it does
not invent one). The engine's replace reference (the object's value at the last token of a neutral
sentence) was never seen in training, whose references were seeded random directions, and the
built-in items are not the training prompts: both are held out.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

READOUTS = ("generated", "constrained", "choice")
DECIDING_READOUT = "choice"


def check_spec(adapter_dir: Path, base: str, layer: int, readout: str, *, items: int, seeds: tuple[int, ...],
               probe_tokens: int):
    """The ``owmi run`` spec of the check: adapted model and its base, Section 7.2's intervention."""
    from tamperbench.owmi.spec import OwmiSpec

    data = dict(models=[f"{base}+peft:{Path(adapter_dir).resolve()}", base],
                objects=[{"kind": "resid_post", "layer": layer}], operators=[{"name": "replace", "dose": 1.0}],
                positions="0,1,2", probes=["detection"], tracks=["A"], scopes=["lifted"],
                conditions=["intervention", "sham"], items_per_benchmark=items, seeds=list(seeds),
                observer_classifier=False, task_max_new_tokens=8, probe_max_new_tokens=probe_tokens)
    if "readout" in OwmiSpec.model_fields:
        data["readout"] = readout
    elif readout != "generated":
        from tamperbench.errors import UserError

        raise UserError(f"--readout: {readout!r} needs the read-out field of the OWMI spec, not in this build")
    return OwmiSpec.model_validate(data)


def rows_of(result: dict, adapted: str) -> list[dict]:
    """The detection cells of a score result, one flat row per (model, read-out)."""
    out = []
    for c in result["cells"]:
        if c["cell"]["probe_family"] != "detection":
            continue
        comp = c["detection"]["complete"]
        rates = c["detection"]["parse_rates"]
        parsed, attempted = sum(r["parsed"] for r in rates), sum(r["attempted"] for r in rates)
        model = c["cell"]["model"]
        lo, hi = comp["margin_ci"]
        out.append({"model": model, "role": "adapted (known positive)" if model == adapted else "unadapted base",
                    "readout": c["cell"].get("readout", "generated"), "pairs": comp["pairs"], "items": comp["items"],
                    "parsed": parsed, "attempted": attempted, "hit_rate": comp["hit_rate"],
                    "false_alarm_rate": comp["false_alarm_rate"], "margin": comp["margin"], "margin_ci": [lo, hi],
                    "auroc": comp["auroc"], "auroc_ci": comp["auroc_ci"],
                    "interval": ("no complete pair" if not comp["pairs"] else "above 0" if lo > 0 else
                                 "below 0" if hi < 0 else "contains 0")})
    return sorted(out, key=lambda r: (READOUTS.index(r["readout"]) if r["readout"] in READOUTS else 9, r["role"]))


def verdict(rows: list[dict]) -> tuple[bool, str]:
    """Pass: under ``choice`` the adapted model's interval lies above 0 and the base's contains 0."""
    got = {r["role"]: r for r in rows if r["readout"] == DECIDING_READOUT}
    a, b = got.get("adapted (known positive)"), got.get("unadapted base")
    if a is None or b is None:
        return False, f"not decided: no {DECIDING_READOUT} read-out rows for both models"
    ok = a["interval"] == "above 0" and b["interval"] == "contains 0"
    return ok, (f"{'PASS' if ok else 'FAIL'}: under the {DECIDING_READOUT} read-out the adapted model's margin interval "
                f"is {a['interval']} and the unadapted model's {b['interval']} (pass: above 0, and contains 0)")


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def table_lines(rows: list[dict]) -> list[str]:
    """Markdown table of the check (the same in the terminal, ``known_positive_check.md`` and the site)."""
    lines = ["| model | read-out | pairs (items) | parsed | hit rate | false-alarm rate | margin over sham [95% CI, "
             "item-clustered] | AUROC [95% CI] | interval |", "|" + "---|" * 9]
    for r in rows:
        none = not r["pairs"]  # every row unparsed: no estimate, said so rather than printed as a number
        margin = "n/a" if none else f"{r['margin']:+.3f} [{r['margin_ci'][0]:+.3f}, {r['margin_ci'][1]:+.3f}]"
        auroc = "n/a" if none else f"{r['auroc']:.3f} [{r['auroc_ci'][0]:.3f}, {r['auroc_ci'][1]:.3f}]"
        lines.append(f"| {r['role']}: `{r['model']}` | {r['readout']} | {r['pairs']} ({r['items']}) | "
                     f"{r['parsed']}/{r['attempted']} | {_fmt(r['hit_rate'])} | {_fmt(r['false_alarm_rate'])} | "
                     f"{margin} | {auroc} | {r['interval']} |")
    return lines


def run_check(out: Path, *, base: str, layer: int, readouts: tuple[str, ...], items: int, seeds: tuple[int, ...],
              probe_tokens: int, n_boot: int, console: Console, strict: bool = True) -> dict:
    """Run the adapted model and its base through ``owmi run`` once per read-out, score, print, save.

    Every read-out's spec is built before any run: one this build cannot run is refused first
    (``strict``, read-outs the user named) or skipped with its reason printed (the default set)."""
    import json

    from tamperbench.errors import UserError
    from tamperbench.fsio import atomic_write
    from tamperbench.owmi.analysis.profile import score_runs
    from tamperbench.owmi.runner import run

    adapter = Path(out) / "adapter"
    err = Console(stderr=True)
    specs = []
    for readout in readouts:
        try:
            specs.append((readout, check_spec(adapter, base, layer, readout, items=items, seeds=seeds,
                                              probe_tokens=probe_tokens)))
        except UserError as why:
            if strict:
                raise
            err.print(f"read-out {readout} skipped: {why}", markup=False)
    if not specs:
        raise UserError(f"--readout: none of {', '.join(readouts)} can run in this build")
    run_dirs = []
    for readout, spec in specs:
        run_dir = Path(out) / f"run-{readout}"
        rep = run(spec, run_dir, console=err)
        err.print(f"{readout}: {rep.written} records written, {rep.skipped_units} of {rep.units} units stored, "
                  f"{rep.seconds:.1f}s -> {run_dir}")
        run_dirs.append(run_dir)
    result = score_runs([*run_dirs, Path(out)], n_boot=n_boot, seed=0, dose_boot=0)
    rows = rows_of(result, spec.models[0])
    ok, line = verdict(rows)
    lines = [f"Known positive through `owmi run` (replace at positions 0-2 of resid_post.{layer}, Track A, detection, "
             "scope lifted; intervention vs sham on the built-in items):", "", *table_lines(rows), "", line]
    for text in lines:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    summary = {"passes": ok, "verdict": line, "rows": rows, "runs": [str(d) for d in run_dirs], "layer": layer,
               "deciding_readout": DECIDING_READOUT}
    atomic_write(Path(out) / "known_positive_check.json", json.dumps(summary, indent=1))
    atomic_write(Path(out) / "known_positive_check.md", "\n".join(lines) + "\n")
    return summary
