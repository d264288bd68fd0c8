"""``tamperbench demo``: the main job on the embedded model, end to end, in a few minutes on a CPU.

Runs each step through the same CLI commands a user would type (so the demo cannot drift from
them), into one output folder, and ends by printing where the results and the report are.
Rerunning resumes: every step skips what its run directory already holds.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.rule import Rule

DEMO_QUESTION = "what causes the phases of the moon?"
# A quick Exact Words run: a few dirty and clean items of the standard preset, both arms.
QUOTE_ITEMS_PER_KIND = 3
# Where examples/owmi_full.json looks for its SAE (relative to the folder the demo runs in).
SAE_FOLDER = "saes/smollm2-135m-resid-post-12"


def demo_steps(out: Path, model: str) -> list[tuple[str, list[str]]]:
    from tamperbench.quote.items import load_items

    items = load_items("standard")
    chosen = [i.id for i in items if i.dirty][:QUOTE_ITEMS_PER_KIND] + \
             [i.id for i in items if not i.dirty][:QUOTE_ITEMS_PER_KIND]
    sleight, quote, owmi = str(out / "sleight"), str(out / "quote"), str(out / "owmi")
    positive = str(out / "owmi-known-positive")
    return [
        ("one greedy answer, token by token", ["answer", DEMO_QUESTION, "--model", model, "--max-new-tokens", "40"]),
        ("Sleight of Word, quick preset", ["sleight", "run", "--model", model, "--preset", "quick", "--out", sleight]),
        ("rule-based evidence detector (offline, no model)", ["judge", "evidence", sleight]),
        ("judge jury (the embedded model as its only juror)",
         ["judge", "run", sleight, "--judge", model, "--max-new-tokens", "64"]),
        ("Sleight of Word tables with judge columns", ["sleight", "table", sleight]),
        ("Exact Words, quick subset, both arms",
         ["quote", "run", "--model", model, "--arm", "both", "--items", ",".join(chosen), "--out", quote]),
        ("OWMI, quick preset (two operators, a dose ladder, two seeds; sham, random, observer; both scopes; "
         "token-level choice read-out)",
         ["owmi", "run", "--preset", "quick", "--model", model, "--readout", "choice", "--out", owmi]),
        ("OWMI known positive: a LoRA trained to report replace-at-positions-0-2, then through owmi run beside its "
         "base (token-level read-out)",
         ["owmi", "known-positive", "--model", model, "--preset", "demo", "--check", "--readout", "choice",
          "--out", positive]),
        ("a small SAE in SAELens's format, for examples/owmi_full.json",
         ["owmi", "train-sae", "--model", model, "--preset", "demo", "--out", SAE_FOLDER]),
        ("report", ["report", sleight, quote, owmi, str(Path(positive) / "run-choice"), "--out", str(out / "report")]),
    ]


def run_demo(app, out: Path, model: str) -> None:
    console = Console()
    for title, argv in demo_steps(out, model):
        console.print(Rule(f"[bold]{title}[/bold]  (tamperbench {' '.join(argv)})"))
        app(argv, standalone_mode=False)
    console.print(Rule("[bold]done[/bold]"))
    console.print(f"Sleight of Word run:  {out / 'sleight'}  (records.duckdb, spec.json, tables.md)")
    console.print(f"Exact Words run:      {out / 'quote'}")
    console.print(f"OWMI run:             {out / 'owmi'}  (tamperbench owmi score {out / 'owmi'})")
    console.print(f"OWMI known positive:  {out / 'owmi-known-positive'}  (known_positive_check.md; all read-outs: "
                  f"tamperbench owmi known-positive --preset demo --check --readout choice --readout generated --readout "
                  f"constrained --out {out / 'owmi-known-positive'})")
    console.print(f"SAE for the full OWMI example: {SAE_FOLDER}  (tamperbench owmi run --config examples/owmi_full.json "
                  "--dry-run --out R)")
    console.print(f"Report site:          {out / 'report' / 'index.html'}  (leaderboards, trial viewer, plots; "
                  "open it from disk)")
    console.print(f"Export any run:       tamperbench export {out / 'sleight'} --format parquet --out sleight.parquet")
