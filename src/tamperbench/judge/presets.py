"""``judge run --preset default|paper``: every judging setting a preset fixes, each overridable by its option.

``paper`` is the reference's jury (fractalego/Sleight-of-Word ``scripts/panel_judge.py`` and
``src/awareness/judge.py``): the prompt byte for byte (``fence=paper``), 256 new tokens, its verdict
parse and its judged text, an unparsed vote counted as "no" (``panel_combine``), and thinking off for
every juror whose chat template is hybrid (reads ``enable_thinking`` or ``thinking``), as the
reference's ``--no-think`` did for its Qwen3 juror. Which jurors are hybrid is known only once they
are loaded (judge/hybrid.py), so the preset names the jurors to check (``no_think_hybrids``): every
juror that ``--thinking`` does not set. Any other juror keeps its template's default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tamperbench.errors import UserError
from tamperbench.judge.runner import JudgeConfig
from tamperbench.judge.thinking import parse_thinking
from tamperbench.spec_base import build_spec

PRESETS: dict[str, dict[str, object]] = {
    "default": {"fence": "nonce", "unparsed": "abstain", "parse": "robust", "judged_text": "safe", "max_new_tokens": 160},
    "paper": {"fence": "paper", "unparsed": "false", "parse": "reference", "judged_text": "reference",
              "max_new_tokens": 256},
}


def judge_config(preset: str, judges: Sequence[str], *, thinking: Sequence[str] | None = None, seed: int = 0,
                 **options: Any) -> JudgeConfig:
    """The config of ``preset`` with every option given (not None) in its place; one line on a bad value."""
    if preset not in PRESETS:
        raise UserError(f"--preset: '{preset}' is not one of {', '.join(PRESETS)}")
    chosen = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(chosen) - set(PRESETS[preset]))
    if unknown:
        raise TypeError(f"judge_config: unknown option(s) {unknown}")
    modes = parse_thinking(thinking, judges)
    told = _named(thinking, judges)
    return build_spec(JudgeConfig, seed=seed, **{**PRESETS[preset], **chosen},
                      thinking=tuple((j, m) for j, m in modes.items() if m != "default"),
                      no_think_hybrids=tuple(j for j in judges if j not in told) if preset == "paper" else ())


def _named(values: Sequence[str] | None, judges: Sequence[str]) -> set[str]:
    """The judges whose thinking ``--thinking`` sets (a bare mode sets every judge's)."""
    named: set[str] = set()
    for raw in values or ():
        judge, sep, _ = raw.rpartition("=")
        named |= {judge} if sep else set(judges)
    return named
