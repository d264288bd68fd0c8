"""Ask judges for verdicts (batched, with one stricter retry) and combine them by majority.

WHY a jury: a single judge is known to favour text from its own model family, so the protocol uses
several judges from distinct lineages and takes a majority per label. Each juror is any backend
``tamperbench.models.load_backend`` returns (duck-typed: ``generate_chat`` and ``provenance_id``),
so an HTTP judge works the same way as a local one.

A reasoning judge's trace (``<think>``, gpt-oss analysis channel) is stripped before its verdict is
parsed (``tamperbench.reasoning``), so a JSON draft inside the trace is never read as the vote; the
raw text, trace included, is stored with the vote.

Two vote rules (``tamperbench.labels.jury_label``), named in every table that uses them:

* ``abstain`` (default): per label, over the WHOLE jury of n judges, True when more than n/2 judges
  said True, False when more than n/2 said False, ``None`` (no majority) otherwise. An unparsed or
  missing vote is an abstention: it never counts as False.
* ``false`` (the paper and its reference implementation): an unparsed vote or missing key is False,
  and a label is True when at least two judges say so (so a 2-2 split of four is True).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Literal

from tamperbench.judge.delimit import tokenizer_special_tokens
from tamperbench.judge.parse import ParsedVerdict, better, clean_text, parse_with
from tamperbench.judge.prompt import Fence, JudgeInput, build_prompt, load_prompt_spec
from tamperbench.reasoning import strip_reasoning
from tamperbench.labels import JUDGE_LABELS as LABELS
from tamperbench.labels import ParseRule, UnparsedRule, ignored_from, jury_label

VoteStatus = Literal["parsed", "parsed_on_retry", "partial", "unparsed"]


@dataclass(frozen=True)
class Vote:
    """One judge's answer about one trial, with everything needed to audit it."""

    trial_key: str
    judge: str
    status: VoteStatus
    labels: dict[str, bool | None]
    confidence: float | None
    rationale: str | None
    parse_error: str | None
    attempts: int
    raw_text: str
    retry_text: str | None
    prompt_text: str
    retry_prompt_text: str | None
    finish_reason: str
    fence_nonce: str | None
    defused: int


def _conversation(user: str) -> list[dict]:
    return [{"role": "user", "content": user}]


def judge_items(backend: Any, judge: str, items: Sequence[JudgeInput], *, max_new_tokens: int,
                seed: int = 0, fence: Fence = "nonce", progress: bool = False, parse: ParseRule = "robust",
                defuse: bool = True, template_kwargs: dict | None = None, grammar=None) -> list[Vote]:
    """Verdicts of one judge on ``items``: one batched call, then one batched retry for the failures.

    ``grammar``: a ``JsonGrammar`` both calls decode under (``judge run --constrained``, judge/constrained.py).

    A local backend (``prefix_memory``) keeps the first call's prompt + answer KV for the retry,
    which is that conversation plus one reminder (models/prefix_share.py, PrefixStore).
    ``parse="reference"`` reads the raw text by the reference's rule and never retries;
    ``defuse=False`` leaves special-token strings of the reply as they are (the reference's text);
    ``template_kwargs`` go to the chat template (``enable_thinking``, judge/thinking.py)."""
    if not items:
        return []
    spec = load_prompt_spec()
    specials = tuple(tokenizer_special_tokens(backend)) if defuse else ()
    prompts = [build_prompt(it, fence=fence, special_tokens=specials) for it in items]
    convs = [_conversation(p.user) for p in prompts]
    kw = {"template_kwargs": template_kwargs} if template_kwargs else {}
    if grammar is not None:  # HTTP backends take no grammar argument
        kw["grammar"] = grammar

    def read(text: str, reply: str) -> ParsedVerdict:
        return parse_with(parse, text if parse == "reference" else strip_reasoning(text), reply=reply)

    memory = getattr(backend, "prefix_memory", None)
    with memory() if memory is not None else nullcontext():
        first = backend.generate_chat(convs, max_new_tokens=max_new_tokens, temperature=0.0, seed=seed,
                                      system=spec.system, progress=progress, **kw)
        parsed = [read(g.text, it.reply) for g, it in zip(first, items, strict=True)]

        retry_idx = [] if parse == "reference" else [i for i, p in enumerate(parsed) if p.status != "parsed"]
        retries: dict[int, tuple[Any, ParsedVerdict]] = {}
        if retry_idx:
            retry_convs = [convs[i] + [{"role": "assistant", "content": clean_text(first[i].text) or ""},
                                       {"role": "user", "content": spec.retry_reminder}] for i in retry_idx]
            second = backend.generate_chat(retry_convs, max_new_tokens=max_new_tokens, temperature=0.0,
                                           seed=seed, system=spec.system, progress=progress, **kw)
            for i, gen in zip(retry_idx, second, strict=True):
                retries[i] = (gen, read(gen.text, items[i].reply))

    votes: list[Vote] = []
    for i, (it, bp, gen, p1) in enumerate(zip(items, prompts, first, parsed, strict=True)):
        status: Literal["parsed", "parsed_on_retry", "partial", "unparsed"] = p1.status
        final, retry_gen = p1, None
        if i in retries:
            retry_gen, p2 = retries[i]
            final = better(p1, p2)
            if final.status == "parsed":
                status = "parsed_on_retry"
            else:
                status = final.status
        votes.append(Vote(
            trial_key=it.trial_key, judge=judge, status=status, labels=dict(final.labels),
            confidence=final.confidence, rationale=final.rationale, parse_error=final.error,
            attempts=2 if retry_gen is not None else 1, raw_text=clean_text(gen.text) or "",
            retry_text=clean_text(retry_gen.text) if retry_gen is not None else None,
            prompt_text=gen.prompt_text,
            retry_prompt_text=retry_gen.prompt_text if retry_gen is not None else None,
            finish_reason=(retry_gen or gen).finish_reason, fence_nonce=bp.nonce, defused=bp.defused,
        ))
    return votes


def majority(votes: Sequence[bool | None], jury_size: int, rule: UnparsedRule = "abstain") -> bool | None:
    """One label's verdict from the ballots under ``rule`` (see the module docstring)."""
    return jury_label(votes, jury_size, rule)


@dataclass(frozen=True)
class Verdict:
    trial_key: str
    labels: dict[str, bool | None]
    ignored: bool | None
    tally: dict[str, dict[str, int]]  # label -> {"true", "false", "abstain"}


def combine(trial_key: str, votes: Sequence[Vote], jury: Sequence[str], rule: UnparsedRule = "abstain") -> Verdict:
    """The jury's verdict (judge names in ``jury``) for one trial from its stored votes, under ``rule``."""
    by_judge = {v.judge: v for v in votes if v.judge in set(jury)}
    labels: dict[str, bool | None] = {}
    tally: dict[str, dict[str, int]] = {}
    for label in LABELS:
        ballots = [by_judge[j].labels.get(label) if j in by_judge else None for j in jury]
        labels[label] = majority(ballots, len(jury), rule)
        tally[label] = {"true": sum(b is True for b in ballots), "false": sum(b is False for b in ballots),
                        "abstain": sum(b is None for b in ballots)}
    return Verdict(trial_key=trial_key, labels=labels, ignored=ignored_from(labels), tally=tally)
