"""``tamperbench demo``: the main job on the embedded model, end to end, in a few minutes on a CPU.

Runs each step through the same CLI commands a user would type (so the demo cannot drift from
them), into one output folder, and ends by printing where the results and the report are.
Rerunning resumes: a step whose outputs are as the last run left them is skipped and replays what it
printed (``demo_steps``); any other step resumes what its run directory already holds. The demo ends
with a table of each step's wall and CPU time (and the install time when ``make demo`` installed).
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

from tamperbench.cli.demo_steps import Step, cpu_seconds, run_steps, step_table

DEMO_QUESTION = "what causes the phases of the moon?"
# A quick Exact Words run: a few dirty and clean items of the standard preset, both arms.
QUOTE_ITEMS_PER_KIND = 2
# The known positive's layer: the OWMI demo preset's (resid_post.12), so that owmi score's claims find the check
# for the demo's cells (they match the check by model, site and read-out).
POSITIVE_LAYER = 12
# owmi score's clustered-bootstrap and dose-response replicates in the demo (the command's defaults: 2000, 100).
SCORE_BOOT, SCORE_DOSE_BOOT = 500, 50
# Where examples/owmi_full.json looks for its SAE (relative to the folder the demo runs in), and its Adam steps
# (the demo preset's 300 halved: the SAE only has to exist, in SAELens's format, for the example's dry run).
SAE_FOLDER = "saes/smollm2-135m-resid-post-12"
SAE_STEPS = 150


def demo_steps(out: Path, model: str) -> list[Step]:
    from tamperbench.quote.items import load_items

    items = load_items("standard")
    chosen = [i.id for i in items if i.dirty][:QUOTE_ITEMS_PER_KIND] + \
             [i.id for i in items if not i.dirty][:QUOTE_ITEMS_PER_KIND]
    sleight, quote, owmi = out / "sleight", out / "quote", out / "owmi"
    positive, score, report = out / "owmi-known-positive", out / "owmi-score", out / "report"
    return [
        Step("one greedy answer, token by token", ["answer", DEMO_QUESTION, "--model", model, "--max-new-tokens", "40"],
             []),
        Step("Sleight of Word, demo preset (2 questions, 2 words; swaps, mentions, matched branches)",
             ["sleight", "run", "--model", model, "--preset", "demo", "--out", str(sleight)], [sleight]),
        Step("rule-based evidence detector (offline, no model)", ["judge", "evidence", str(sleight)], [sleight]),
        Step("judge jury (the embedded model as its only juror)",
             ["judge", "run", str(sleight), "--judge", model, "--max-new-tokens", "64"], [sleight]),
        Step("Sleight of Word tables with judge columns", ["sleight", "table", str(sleight)], [sleight]),
        Step("Exact Words, quick subset, both arms",
             ["quote", "run", "--model", model, "--arm", "both", "--items", ",".join(chosen), "--out", str(quote)],
             [quote]),
        Step("OWMI, demo preset (two operators, add at two doses, two seeds; sham, random, observer; both scopes; "
             "token-level choice read-out)",
             ["owmi", "run", "--preset", "demo", "--model", model, "--readout", "choice", "--out", str(owmi)], [owmi]),
        Step("OWMI known positive: a LoRA trained to report replace-at-positions-0-2, then through owmi run beside "
             "its base (token-level read-out)",
             ["owmi", "known-positive", "--model", model, "--preset", "demo", "--check", "--readout", "choice",
              "--layer", str(POSITIVE_LAYER), "--out", str(positive)], [positive]),
        Step("owmi score: profile, detection, anchors and claim verdicts",
             ["owmi", "score", str(owmi), str(positive), "--boot", str(SCORE_BOOT), "--dose-boot", str(SCORE_DOSE_BOOT),
              "--out", str(score)], [score]),
        Step("a small SAE in SAELens's format, for examples/owmi_full.json",
             ["owmi", "train-sae", "--model", model, "--preset", "demo", "--steps", str(SAE_STEPS), "--out", SAE_FOLDER], [Path(SAE_FOLDER)]),
        Step("report", ["report", str(sleight), str(quote), str(owmi), str(positive / "run-choice"),
                        "--out", str(report)], [report]),
    ]


def run_demo(app, out: Path, model: str) -> None:
    console = Console()
    w0, c0 = time.perf_counter(), cpu_seconds()
    rows = run_steps(app, demo_steps(out, model), out, console)
    console.print(Rule("[bold]done[/bold]"))
    console.print(f"Sleight of Word run:  {out / 'sleight'}  (records.duckdb, spec.json, tables.md)")
    console.print(f"Exact Words run:      {out / 'quote'}")
    console.print(f"OWMI run:             {out / 'owmi'}  (claims: {out / 'owmi-score' / 'owmi_score.md'})")
    console.print(f"OWMI known positive:  {out / 'owmi-known-positive'}  (known_positive_check.md; all read-outs: "
                  f"tamperbench owmi known-positive --preset demo --check --readout choice --readout generated --readout "
                  f"constrained --out {out / 'owmi-known-positive'})")
    console.print(f"SAE for the full OWMI example: {SAE_FOLDER}  (tamperbench owmi run --config examples/owmi_full.json "
                  "--dry-run --out R)")
    console.print(f"Report site:          {out / 'report' / 'index.html'}  (leaderboards, trial viewer, plots; "
                  "open it from disk)")
    console.print(f"Export any run:       tamperbench export {out / 'sleight'} --format parquet --out sleight.parquet")
    console.print(step_table(rows, time.perf_counter() - w0, cpu_seconds() - c0))
