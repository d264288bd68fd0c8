"""``tamperbench judge ...``: run the jury, score evidence, serve the annotation page, report agreement."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from tamperbench.cli.options import BatchSizeOpt, ChatTemplateOpt, DeviceOpt, DtypeOpt, SeedOpt
from tamperbench.errors import UserError

app = typer.Typer(help="Judge jury: label tampered replies, agreement between judges, human gold set.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
console = Console()

RunArg = Annotated[Path, typer.Argument(help="Run directory holding sleight_trials records.")]


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def print_agreement(rows: list, title: str = "agreement") -> None:
    table = Table(title=title)
    for col in ("kind", "label", "rater a", "rater b", "n", "kappa", "accuracy"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.kind, r.label, r.rater_a, r.rater_b, str(r.n), _fmt(r.kappa), _fmt(r.accuracy))
    console.print(table)


@app.command("run")
def run_cmd(
    run: RunArg,
    judge: Annotated[list[str], typer.Option("--judge", help="Judge model spec; repeat for a jury (3 in the paper).")],
    max_new_tokens: Annotated[Optional[int], typer.Option("--max-new-tokens", help="Token budget of each judge answer (160; 256 under --preset paper, as the reference).")] = None,
    fence: Annotated[Optional[str], typer.Option("--fence", help="nonce (hardened delimiter, default) or paper (the reference's prompt byte for byte).")] = None,
    unparsed: Annotated[Optional[str], typer.Option("--unparsed", help="abstain (default: an unparsed vote abstains, strict majority) or false (paper: unparsed = false, true when >= 2 judges say so).")] = None,
    preset: Annotated[str, typer.Option("--preset", help="default (nonce fence, unparsed abstain, robust parse, safe text) or paper (paper fence, unparsed false, reference parse and text, 256 tokens); each option overrides.")] = "default",
    parse: Annotated[Optional[str], typer.Option("--parse", help="robust (default: loose JSON, reasoning stripped, one retry) or reference (the reference's greedy json.loads, no retry).")] = None,
    judged_text: Annotated[Optional[str], typer.Option("--judged-text", help="safe (default: reply without special tokens, special-token strings defused) or reference (the reply with its special tokens, as the reference judged it).")] = None,
    thinking: Annotated[Optional[list[str]], typer.Option("--thinking", help="default|on|off for every judge, or JUDGE=off for one (repeat): the chat template's enable_thinking or its equivalent. --preset paper sets off every judge whose template is hybrid (the reference's --no-think).")] = None,
    constrained: Annotated[bool, typer.Option("--constrained", help="Decode each verdict under a grammar built from the verdict's JSON schema (llguidance; pip install 'tamperbench[constrained]'). Off by default; not with --preset paper.")] = False,
    seed: SeedOpt = 0,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = None,
    batch_size: BatchSizeOpt = None,
    chat_template: ChatTemplateOpt = None,
) -> None:
    """Judge every tampered reply of RUN with a jury; majority vote per label; store votes and verdicts."""
    from tamperbench.judge.agreement import compute_agreement
    from tamperbench.judge.runner import open_run, run_jury
    from tamperbench.labels import JUDGED_TEXT_RULE_TEXT, PARSE_RULE_TEXT

    from tamperbench.judge.presets import judge_config

    if constrained and preset == "paper":
        raise UserError("--constrained: not with --preset paper, whose judges decode freely as the paper's did; "
                        "drop --constrained to reproduce the paper, or drop --preset paper to constrain")
    cfg = judge_config(preset, judge, thinking=thinking, seed=seed, max_new_tokens=max_new_tokens, fence=fence,
                       unparsed=unparsed, parse=parse, judged_text=judged_text)
    cfg = cfg.model_copy(update={"constrained": constrained}) if constrained else cfg
    fence, unparsed = cfg.fence, cfg.unparsed
    grammar = cfg.grammar()  # --constrained without llguidance: one line, before anything is read or loaded

    def loader(spec: str):
        from tamperbench.models import load_backend

        return load_backend(spec, device=device, dtype=dtype, batch_size=batch_size, chat_template=chat_template)

    def precheck(spec: str):
        from tamperbench.models.sources import resolve
        from tamperbench.models.templating import resolve_chat_template

        resolve_chat_template(chat_template)
        from tamperbench.models.registry import LOCAL_SCHEMES, scheme_of

        if scheme_of(spec) not in LOCAL_SCHEMES:  # openai:, vllm: check their own spec when loaded
            if constrained:
                raise UserError("--constrained: only local transformers judges decode under a grammar")
            return None
        return resolve(spec)

    def on_thinking(lines: list[str], warnings: list[str]) -> None:
        for line in lines:
            console.print(f"thinking: {line}", highlight=False, markup=False)
        for line in warnings:
            console.print(line, highlight=False, markup=False, style="bold")

    start = time.perf_counter()
    summary = run_jury(run, judge, loader, cfg, precheck=precheck, on_thinking=on_thinking)
    elapsed = time.perf_counter() - start
    console.print(f"{summary.n_trials} sleight records: {summary.n_judged} judged, {summary.n_untouched} untouched "
                  f"(not judged), {summary.n_empty} swapped but empty (not judged); {elapsed:.1f} s")
    rule = {"abstain": "unparsed votes are abstentions, never False",
            "false": "paper rule: unparsed votes count as False"}[unparsed]
    from tamperbench.judge.constrained import describe

    console.print(f"fence: {fence}; {rule}; {PARSE_RULE_TEXT[cfg.parse]}; judged text {JUDGED_TEXT_RULE_TEXT[cfg.judged_text]}; "
                  f"decoding: {describe(grammar.provenance() if grammar else None)}")
    rates = Table(title=f"judge votes ({rule})")
    for col in ("judge", "new votes", "parsed", "parsed on retry", "partial", "unparsed", "unparsed rate"):
        rates.add_column(col)
    for j, counts in summary.status_counts.items():
        n = sum(counts.values())
        rates.add_row(j, str(summary.new_votes.get(j, 0)), *(str(counts[k]) for k in
                      ("parsed", "parsed_on_retry", "partial", "unparsed")), _fmt(counts["unparsed"] / n if n else None))
    console.print(rates)
    store = open_run(run)
    try:
        print_verdict_rates(store)
        print_agreement(compute_agreement(store))
    finally:
        store.close()


def print_verdict_rates(store) -> None:
    labels = ("flagged", "corrected", "derailed", "aware", "ignored")
    q = ("SELECT count(*), " + ", ".join(f"avg({c}::INT), count({c})" for c in labels) + ", count(*) FILTER (WHERE "
         "flagged IS NULL OR corrected IS NULL OR derailed IS NULL OR aware IS NULL) FROM judge_verdicts")
    n, *cells, undecided = store.con.execute(q).fetchone()
    t = Table(title="jury verdicts (% of trials with a majority on that label; n=with a majority/judged)")
    for col in ("trials", *labels, "trials with a no-majority label"):
        t.add_column(col)
    t.add_row(str(n), *(f"{_fmt(None if r is None else 100 * r, 1)} (n={k}/{n})" for r, k in zip(cells[::2], cells[1::2])),
              str(undecided))
    console.print(t)


@app.command("evidence")
def evidence_cmd(run: RunArg) -> None:
    """Score RUN with the rule-based evidence detector only (offline, no model)."""
    from tamperbench.judge.records import read_sleight_trials
    from tamperbench.judge.runner import open_run, split_trials, write_evidence

    store = open_run(run)
    try:
        trials, untouched, _ = split_trials(read_sleight_trials(store))
        added = write_evidence(store, trials)
        n, fl, aw, fx, ax = store.con.execute(
            "SELECT count(*), sum(flagged::INT), sum(aware::INT), sum(flagged_extended::INT), "
            "sum(aware_extended::INT) FROM judge_evidence").fetchone() or (0, 0, 0, 0, 0)
        console.print(f"evidence: {added} new rows; {n} replies scored, {fl or 0} with a flag cue, "
                      f"{aw or 0} with a substitution cue (the reference's cue list and rule; with tamperbench's "
                      f"cues too: {fx or 0} and {ax or 0}) ({untouched} untouched trials not scored)")
    finally:
        store.close()


@app.command("annotate")
def annotate_cmd(
    run: RunArg,
    sample: Annotated[int, typer.Option("--sample", help="How many judgeable replies to sample for labelling.")],
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (0 = any free port).")] = 8765,
    annotator: Annotated[str, typer.Option("--annotator", help="Name stored with each label.")] = "human",
    seed: SeedOpt = 0,
    exit_when_done: Annotated[bool, typer.Option("--exit-when-done", help="Stop once every sampled reply is labelled.")] = False,
) -> None:
    """Serve a local page where a person labels sampled replies blind to the jury."""
    from tamperbench.judge.annotate import AnnotationServer, prepare

    app_state = prepare(run, sample, seed=seed, annotator=annotator)
    try:
        server = AnnotationServer(app_state, port=port)
        url = server.start()
        print(f"annotation page: {url}", flush=True)
        print("labels are saved as you go; press Ctrl-C to stop", flush=True)
        try:
            while not (exit_when_done and app_state.all_done()):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
        print(f"{len(app_state.labels())} of {sample} sampled replies labelled by {annotator}", flush=True)
    finally:
        app_state.store.close()


@app.command("agreement")
def agreement_cmd(run: RunArg) -> None:
    """Pairwise Cohen and Fleiss kappa per label; evidence vs jury; judges vs human labels."""
    from tamperbench.judge.agreement import compute_agreement
    from tamperbench.judge.runner import open_run

    store = open_run(run)
    try:
        rows = compute_agreement(store)
        print_agreement(rows)
        if not any(r.kind == "judge_vs_human" for r in rows):
            console.print("no human labels yet: run `tamperbench judge annotate RUN --sample N` to add some")
    finally:
        store.close()
