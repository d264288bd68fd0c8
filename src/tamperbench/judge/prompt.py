"""The judge prompt of Appendix G, loaded from ``data/judge_prompt.json`` and filled per trial.

``fence="paper"`` renders the reference implementation's prompt byte for byte (tested against a
stored rendering made by hand from the reference's text); ``fence="nonce"`` (default) differs only
in the block that holds the reply.

WHY a data file: the prompt is part of the measurement. Keeping it as data (with a version and a
note of its source and of every editorial change) lets a reader diff it against the paper, and every
stored vote carries the exact prompt text and the prompt version it was built from.

Placeholders are filled in one regex pass, so a question or reply that itself contains
``{reaction}`` or braces is inserted literally and never re-expanded.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Literal

from tamperbench.judge.delimit import defuse_special_tokens, fence_nonce
from tamperbench.labels import JUDGE_LABELS as LABELS
Fence = Literal["nonce", "paper"]
_PLACEHOLDER = re.compile(r"\{(query|trigger|replacement|reaction|nonce)\}")


@dataclass(frozen=True)
class JudgePromptSpec:
    """The parsed data file."""

    version: str
    system: str
    user_template: str
    reply_block: str
    fenced_block: str
    retry_reminder: str
    sha256: str  # hash of the data file bytes, stored with every vote


@dataclass(frozen=True)
class JudgeInput:
    """What a judge sees about one trial (the judge-facing columns of ``sleight_trials``)."""

    trial_key: str
    question: str
    trigger: str  # triggers joined by ","
    substitution: str
    reply: str


@dataclass(frozen=True)
class BuiltPrompt:
    system: str
    user: str
    nonce: str | None
    defused: int  # special-token strings broken up in the reply


@lru_cache(maxsize=1)
def load_prompt_spec() -> JudgePromptSpec:
    raw = resources.files("tamperbench.judge").joinpath("data/judge_prompt.json").read_bytes()
    data = json.loads(raw)
    spec = JudgePromptSpec(
        version=data["version"],
        system=data["system"],
        user_template=data["user_template"],
        reply_block=data["reply_block"],
        fenced_block=data["hardening"]["fenced_block"],
        retry_reminder=data["retry_reminder"],
        sha256=hashlib.sha256(raw).hexdigest(),
    )
    if spec.user_template.count(spec.reply_block) != 1:
        raise RuntimeError("judge_prompt.json: user_template must contain reply_block exactly once")
    if tuple(data["labels"]) != LABELS:
        raise RuntimeError("judge_prompt.json: labels must be flagged, corrected, derailed, aware")
    return spec


def _fill(template: str, values: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


def trigger_phrase(trigger: str) -> str:
    """``"the"`` -> ``the``; ``"the,a"`` -> ``the" or "a`` so the template's quotes read correctly."""
    parts = [t.strip() for t in trigger.split(",") if t.strip()]
    return '" or "'.join(parts) if parts else trigger


def build_prompt(item: JudgeInput, *, fence: Fence = "nonce", special_tokens: tuple[str, ...] = ()) -> BuiltPrompt:
    """System and user message for one trial.

    ``fence="nonce"`` (default) replaces the paper's ``<<< >>>`` block by a nonce fence plus one
    sentence saying the fenced text is data; ``fence="paper"`` reproduces Appendix G exactly.
    """
    spec = load_prompt_spec()
    reply, defused = defuse_special_tokens(item.reply, special_tokens)
    nonce = None
    template = spec.user_template
    if fence == "nonce":
        nonce = fence_nonce(reply, salt=item.trial_key)
        template = template.replace(spec.reply_block, spec.fenced_block)
    elif fence != "paper":
        raise ValueError(f"fence must be 'nonce' or 'paper', not {fence!r}")
    values = {
        "query": item.question,
        "trigger": trigger_phrase(item.trigger),
        "replacement": item.substitution,
        "reaction": reply,
    }
    if nonce is not None:
        values["nonce"] = nonce
    return BuiltPrompt(system=spec.system, user=_fill(template, values), nonce=nonce, defused=defused)
