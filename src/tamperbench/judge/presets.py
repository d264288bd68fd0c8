"""``judge run --preset default|paper``: every judging setting a preset fixes, each overridable by its option.

``paper`` is the reference's jury (fractalego/Sleight-of-Word ``scripts/panel_judge.py`` and
``src/awareness/judge.py``): the prompt byte for byte (``fence=paper``), 256 new tokens, its verdict
parse and its judged text, an unparsed vote counted as "no" (``panel_combine``). Thinking stays each
template's default unless ``--thinking`` says otherwise: the reference switched it off per judge
(``--no-think`` for its Qwen3 juror), so a preset cannot know which of your judges to switch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tamperbench.errors import UserError
from tamperbench.judge.runner import JudgeConfig
from tamperbench.judge.thinking import parse_thinking
from tamperbench.specs import build_spec

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
    return build_spec(JudgeConfig, seed=seed, **{**PRESETS[preset], **chosen},
                      thinking=tuple((j, m) for j, m in modes.items() if m != "default"))
