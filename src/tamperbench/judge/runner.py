"""``judge run``: load the jury, judge every judgeable trial, store votes, verdicts and agreement.

WHY this order: every check that can fail on user input (the run exists and has sleight records,
every ``--judge`` loads) happens before the first write, so a bad command leaves the run untouched.
Judging then proceeds judge by judge in batches of the backend's batch size; each batch of votes is
written in one transaction, so an interrupted run resumes per (trial, judge) on the next call.
Verdicts, parse rates and agreement are derived from the stored votes and replaced atomically at
the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any
from dataclasses import dataclass, field

from pydantic import Field
from pathlib import Path


from tamperbench.errors import UserError
from tamperbench.judge.evidence import DETECTOR_VERSION, detect
from tamperbench.judge.jury import Vote, combine, judge_items
from tamperbench.judge.prompt import LABELS, Fence, JudgeInput, load_prompt_spec
from tamperbench.judge.thinking import ThinkingSetting, thinking_setting
from tamperbench.labels import JudgedText, ParseRule, ThinkingMode, UnparsedRule
from tamperbench.judge.records import (
    JudgeEvidenceRecord,
    JudgeVerdictRecord,
    JudgeVoteRecord,
    ParseRateRecord,
    SleightTrial,
    read_sleight_trials,
    replace_rows,
)
from tamperbench.progress import progress_bar
from tamperbench.runs.driver import Executor, execute, record_provenance
from tamperbench.runs.units import Finished, WorkUnit
from tamperbench.spec_base import MAX_NEW_TOKENS, FrozenSpec, Seed, Temperature
from tamperbench.store import RunStore, trial_key

Loader = Callable[[str], object]


class JudgeConfig(FrozenSpec):
    """How the jury judges; frozen, constraints on the fields (a JSON verdict needs >= 16 tokens)."""

    max_new_tokens: int = Field(default=160, ge=16, le=MAX_NEW_TOKENS)
    seed: Seed = 0
    fence: Fence = "nonce"
    temperature: Temperature = 0.0
    unparsed: UnparsedRule = "abstain"  # how verdicts treat unparsed votes; votes themselves do not depend on it
    parse: ParseRule = "robust"  # how a judge's text becomes a vote (judge/parse.py)
    judged_text: JudgedText = "safe"  # the reply as judged: safe (no special tokens, defused) or reference
    thinking: tuple[tuple[str, ThinkingMode], ...] = ()  # (judge, mode) where not the template's default
    no_think_hybrids: tuple[str, ...] = ()  # judges set off once loaded if their template is hybrid (judge/hybrid.py)
    constrained: bool = False  # each verdict decoded under the verdict schema's grammar (judge/constrained.py)

    @property
    def config_id(self) -> str:
        spec = load_prompt_spec()
        # the newer settings join the hash only when not their default, so votes stored before they existed keep their keys
        extra: dict[str, object] = {k: v for k, v, default in (("parse", self.parse, "robust"), ("judged_text", self.judged_text, "safe"),
                                           ("thinking", [list(p) for p in self.thinking if p[1] != "default"], []))
                 if v != default}
        if self.constrained:
            from tamperbench.judge.constrained import verdict_schema_sha256

            extra["grammar_sha256"] = verdict_schema_sha256()
        return trial_key({"prompt_sha256": spec.sha256, "fence": self.fence, "max_new_tokens": self.max_new_tokens,
                          "seed": self.seed, "temperature": self.temperature, **extra})[:16]

    def thinking_of(self, judge: str) -> ThinkingMode:
        return dict(self.thinking).get(judge, "default")

    def grammar(self):
        """The verdict grammar under ``constrained`` (judge/constrained.py), else None."""
        from tamperbench.judge.constrained import verdict_grammar

        return verdict_grammar() if self.constrained else None


@dataclass
class RunSummary:
    n_trials: int
    n_untouched: int
    n_empty: int
    n_judged: int
    new_votes: dict[str, int] = field(default_factory=dict)
    status_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    thinking: list[str] = field(default_factory=list)  # one line per judge: its thinking setting and template


def open_run(run_dir: Path) -> RunStore:
    if not Path(run_dir).is_dir():
        raise UserError(f"RUN: {run_dir} is not a directory")
    return RunStore.open_existing(run_dir)


def vote_key(trial: str, judge: str, config_id: str) -> str:
    return trial_key({"trial_key": trial, "judge": judge, "config_id": config_id})


def evidence_key(trial: str) -> str:
    return trial_key({"trial_key": trial, "detector": DETECTOR_VERSION})


def to_input(t: SleightTrial, judged_text: JudgedText = "safe") -> JudgeInput:
    reply = t.reaction_text_special if judged_text == "reference" else t.reaction_text
    return JudgeInput(trial_key=t.key, question=t.question, trigger=t.trigger, substitution=t.substitution,
                      reply=reply if reply is not None else t.reaction_text)


def split_trials(trials: Sequence[SleightTrial]) -> tuple[list[SleightTrial], int, int]:
    """(judgeable trials, untouched count, swapped-but-empty count)."""
    untouched = sum(1 for t in trials if t.untouched or t.swap_count < 1)
    empty = sum(1 for t in trials if not (t.untouched or t.swap_count < 1) and not t.reaction_text.strip())
    return [t for t in trials if t.judgeable], untouched, empty


def require_special_text(run_dir: Path, trials: Sequence[SleightTrial]) -> None:
    """``--judged-text reference`` needs the reply as decoded with its special tokens, stored since this option."""
    missing = sum(t.reaction_text_special is None for t in trials)
    if missing:
        raise UserError(f"--judged-text reference: {missing} of {len(trials)} trials of {run_dir} were stored without "
                        "the reply's special-token text (sleight_trials.reaction_text_special); rerun `sleight run` "
                        "into a new directory, or judge with --judged-text safe")


def load_jury(judges: Sequence[str], loader: Loader, precheck: Loader | None = None) -> dict[str, object]:
    """Load every judge up front; any failure is a UserError naming that --judge, before any write.

    ``precheck`` (cheap, e.g. resolving the spec to files) runs on every judge before the first
    expensive load, so a typo in the third --judge fails in a second, not after two model loads.
    """
    if not judges:
        raise UserError("--judge: give at least one judge model spec")
    dupes = sorted({j for j in judges if list(judges).count(j) > 1})
    if dupes:
        raise UserError(f"--judge: {', '.join(dupes)} given more than once; a jury needs distinct judges")
    for spec in judges:
        if precheck is None:
            break
        try:
            precheck(spec)
        except UserError as err:
            raise UserError(f"--judge {spec}: cannot load this judge ({err})") from None
    jury: dict[str, object] = {}
    for spec in judges:
        try:
            jury[spec] = loader(spec)
        except UserError as err:
            raise UserError(f"--judge {spec}: cannot load this judge ({err})") from None
    return jury


def write_evidence(store: RunStore, trials: Sequence[SleightTrial]) -> int:
    """Evidence for every judgeable trial not yet scored by this detector version (rows of an older
    version are derived data: dropped, so each trial has one evidence row)."""
    if store.has_table("judge_evidence"):
        store.ensure_table("judge_evidence", JudgeEvidenceRecord)
        store.con.execute('DELETE FROM "judge_evidence" WHERE detector_version <> ?', [DETECTOR_VERSION])
    have = store.keys("judge_evidence")
    recs = []
    for t in trials:
        k = evidence_key(t.key)
        if k in have:
            continue
        e = detect(t.reaction_text, t.substitution)
        recs.append(JudgeEvidenceRecord(key=k, trial_key=t.key, flagged=e.flagged, aware=e.aware, cues=list(e.cues),
                                        snippets=list(e.snippets), detector_version=DETECTOR_VERSION,
                                        flagged_extended=e.flagged_extended, aware_extended=e.aware_extended))
    store.ensure_table("judge_evidence", JudgeEvidenceRecord)
    return store.write("judge_evidence", recs)


def _labels(labels: dict[str, bool | None]) -> dict[str, Any]:
    """The label columns of a record, one per ``LABELS`` entry."""
    return {k: labels[k] for k in LABELS}


def vote_record(v: Vote, cfg: JudgeConfig, provenance_id: str,
                thinking: ThinkingSetting | None = None) -> JudgeVoteRecord:
    spec = load_prompt_spec()
    thinking = thinking or ThinkingSetting("default")
    return JudgeVoteRecord(
        key=vote_key(v.trial_key, v.judge, cfg.config_id), provenance_id=provenance_id, trial_key=v.trial_key,
        judge=v.judge, config_id=cfg.config_id, status=v.status, **_labels(v.labels),
        confidence=v.confidence, rationale=v.rationale, parse_error=v.parse_error, attempts=v.attempts,
        raw_text=v.raw_text, retry_text=v.retry_text, prompt_text=v.prompt_text,
        retry_prompt_text=v.retry_prompt_text, finish_reason=v.finish_reason, fence=cfg.fence,
        fence_nonce=v.fence_nonce, defused_special_tokens=v.defused, prompt_version=spec.version,
        prompt_sha256=spec.sha256, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, seed=cfg.seed,
        parse_rule=cfg.parse, judged_text=cfg.judged_text, thinking=thinking.mode,
        template_kwargs=thinking.template_kwargs or None, thinking_effect=thinking.effect,
        constrained=cfg.constrained, grammar=cfg.grammar().provenance() if cfg.constrained else None)


@dataclass(frozen=True)
class VoteWork:
    """A work unit's payload: one judge's vote on one reply (picklable, for any executor)."""

    judge: str
    item: JudgeInput


@dataclass
class JuryContext:
    """What a worker process holds: the loaded judges, the judging settings and each judge's provenance id."""

    jury: dict[str, object]
    cfg: JudgeConfig
    pids: dict[str, str]


def setup_worker(config: tuple[list[str], dict, JudgeConfig]) -> JuryContext:
    """Worker setup for an executor in another process: load every judge (``load_backend`` options)."""
    from tamperbench.models import load_backend

    judges, options, cfg = config
    jury = {j: load_backend(j, **options) for j in judges}
    return JuryContext(jury, cfg, {j: getattr(b, "provenance_id", "") for j, b in jury.items()})


def work(ctx: JuryContext, units: list[WorkUnit], live=None) -> Iterator[list[Finished]]:
    """Judge by judge, in chunks of that judge's batch size; yield each chunk's votes as it finishes."""
    cfg = ctx.cfg
    for judge, backend in ctx.jury.items():
        todo = [u for u in units if u.payload.judge == judge]
        size = max(1, int(getattr(backend, "max_batch_size", 8)))
        think = thinking_setting(backend, cfg.thinking_of(judge))
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            votes = judge_items(backend, judge, [u.payload.item for u in chunk], max_new_tokens=cfg.max_new_tokens,
                                seed=cfg.seed, fence=cfg.fence, progress=False, parse=cfg.parse,
                                defuse=cfg.judged_text == "safe", template_kwargs=think.template_kwargs,
                                grammar=cfg.grammar())
            yield [Finished(u.key, {"judge_votes": [vote_record(v, cfg, ctx.pids[judge], think)]}, {"judge": judge})
                   for u, v in zip(chunk, votes)]


WORKER = "tamperbench.judge.runner:setup_worker", "tamperbench.judge.runner:work"


def plan_votes(store: RunStore, judges: Sequence[str], trials: Sequence[SleightTrial], cfg: JudgeConfig) -> list[WorkUnit]:
    """Every (judge, judgeable trial) vote not yet stored under ``cfg``, judge by judge."""
    have = store.keys("judge_votes")
    return [WorkUnit(k, VoteWork(j, to_input(t, cfg.judged_text))) for j in judges for t in trials
            if (k := vote_key(t.key, j, cfg.config_id)) not in have]


def judge_all(store: RunStore, jury: dict[str, object], trials: Sequence[SleightTrial], cfg: JudgeConfig,
              *, show_progress: bool = True, executor: Executor | None = None) -> dict[str, int]:
    """Votes of every judge on every judgeable trial not yet voted on under ``cfg``: plan, then the run
    driver's executing step (runs/driver.py ``execute``: any executor, one commit per finished chunk).
    Returns new votes per judge."""
    store.ensure_table("judge_votes", JudgeVoteRecord)
    units = plan_votes(store, list(jury), trials, cfg)
    pids = {judge: record_provenance(store, backend) for judge, backend in jury.items()}
    written = dict.fromkeys(jury, 0)
    with progress_bar("judge", unit="judgments", disable=not show_progress) as bar:
        tasks = {j: bar.add_task(j, total=sum(u.payload.judge == j for u in units)) for j in jury}
        seen = [0]

        def on_batch(batch: list[Finished], report) -> None:
            judge = batch[0].stats["judge"]
            written[judge] += report.written["judge_votes"] - seen[0]
            seen[0] = report.written["judge_votes"]
            bar.advance(tasks[judge], len(batch))

        config: tuple[list[str], dict, JudgeConfig] = (list(jury), {}, cfg)  # another process would load the judges by name (default options)
        execute(store, units, WORKER, config, executor=executor, context=JuryContext(jury, cfg, pids), on_batch=on_batch)
    return written


def load_votes(store: RunStore, judges: Sequence[str], config_id: str) -> list[Vote]:
    placeholders = ", ".join("?" for _ in judges)
    rows = store.rows("judge_votes", f"WHERE config_id = ? AND judge IN ({placeholders})", [config_id, *judges])
    return [Vote(trial_key=r["trial_key"], judge=r["judge"], status=r["status"], labels={k: r[k] for k in LABELS},
                 confidence=r["confidence"], rationale=r["rationale"], parse_error=r["parse_error"],
                 attempts=r["attempts"], raw_text=r["raw_text"], retry_text=r["retry_text"],
                 prompt_text=r["prompt_text"], retry_prompt_text=r["retry_prompt_text"],
                 finish_reason=r["finish_reason"], fence_nonce=r["fence_nonce"],
                 defused=r["defused_special_tokens"]) for r in rows]


def write_verdicts(store: RunStore, trials: Sequence[SleightTrial], jury: Sequence[str], cfg_id: str,
                   provenance_ids: Sequence[str], unparsed: UnparsedRule = "abstain") -> list[JudgeVerdictRecord]:
    """The jury's verdict per judgeable trial from stored votes under ``unparsed``; replaces the table atomically."""
    if store.has_table("judge_verdicts") and "unparsed_rule" not in store.column_types("judge_verdicts"):
        store.con.execute('DROP TABLE "judge_verdicts"')  # derived rows of an older layout: rebuilt just below
    by_trial: dict[str, list[Vote]] = {}
    for v in load_votes(store, jury, cfg_id):
        by_trial.setdefault(v.trial_key, []).append(v)
    recs = []
    for t in trials:
        verdict = combine(t.key, by_trial.get(t.key, []), jury, unparsed)
        recs.append(JudgeVerdictRecord(key=t.key, trial_key=t.key, provenance_id=",".join(provenance_ids),
                                       **_labels(verdict.labels), ignored=verdict.ignored, n_judges=len(jury),
                                       jury=list(jury), config_id=cfg_id, tally=verdict.tally,
                                       unparsed_rule=unparsed))
    replace_rows(store, "judge_verdicts", JudgeVerdictRecord, recs)
    return recs


def parse_rates(store: RunStore, jury: Sequence[str], cfg_id: str) -> list[ParseRateRecord]:
    """Per-judge parse status counts (unparsed never silently counted as False); replaced atomically."""
    recs = []
    for judge in jury:
        q = "SELECT status, count(*) FROM judge_votes WHERE judge = ? AND config_id = ? GROUP BY status"
        counts = dict(store.con.execute(q, [judge, cfg_id]).fetchall())
        n = sum(counts.values())
        recs.append(ParseRateRecord(
            key=trial_key({"judge": judge, "config_id": cfg_id}), judge=judge, config_id=cfg_id, n_votes=n,
            n_parsed=counts.get("parsed", 0), n_parsed_on_retry=counts.get("parsed_on_retry", 0),
            n_partial=counts.get("partial", 0), n_unparsed=counts.get("unparsed", 0),
            unparsed_rate=(counts.get("unparsed", 0) / n) if n else 0.0))
    replace_rows(store, "judge_parse_rates", ParseRateRecord, recs)
    return recs


def run_jury(run_dir: Path, judges: Sequence[str], loader: Loader, cfg: JudgeConfig, *,
             show_progress: bool = True, precheck: Loader | None = None,
             on_thinking: Callable[[list[str], list[str]], None] | None = None) -> RunSummary:
    """The whole ``judge run`` pipeline; returns counts for the CLI to print. ``on_thinking(lines, warnings)``
    hears each judge's thinking setting once the jury is loaded, before any judging."""
    store = open_run(run_dir)
    try:
        all_trials = read_sleight_trials(store)
        trials, untouched, empty = split_trials(all_trials)
        if not trials:
            raise UserError(f"{run_dir}: none of the {len(all_trials)} sleight records has a swap and a non-empty "
                            f"reply ({untouched} untouched, {empty} empty): nothing to judge")
        if cfg.judged_text == "reference":
            require_special_text(run_dir, trials)
        if cfg.constrained:
            cfg.grammar()  # the library and the schema, before any model is loaded
        jury = load_jury(judges, loader, precheck)
        from tamperbench.judge.hybrid import resolve_paper_thinking

        cfg, thinking, warnings = resolve_paper_thinking(cfg, jury)
        if on_thinking is not None:
            on_thinking(thinking, warnings)
        if cfg.constrained:
            from tamperbench.judge.constrained import check_jury

            check_jury(jury)
        write_evidence(store, trials)
        new = judge_all(store, jury, trials, cfg, show_progress=show_progress)
        pids = [getattr(b, "provenance_id", "") for b in jury.values()]
        write_verdicts(store, trials, list(jury), cfg.config_id, pids, cfg.unparsed)
        rates = parse_rates(store, list(jury), cfg.config_id)
        from tamperbench.judge.agreement import compute_agreement

        compute_agreement(store)
        return RunSummary(n_trials=len(all_trials), n_untouched=untouched, n_empty=empty, n_judged=len(trials),
                          new_votes=new, status_counts={r.judge: {"parsed": r.n_parsed,
                                                                  "parsed_on_retry": r.n_parsed_on_retry,
                                                                  "partial": r.n_partial, "unparsed": r.n_unparsed}
                                                        for r in rates}, thinking=thinking)
    finally:
        store.close()
