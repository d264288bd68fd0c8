"""Per-judge thinking switch, through the chat template: ``--thinking [JUDGE=]default|on|off``.

WHY: a hybrid reasoning judge (Qwen3) spends its token budget on a trace unless its template is told
not to open one. The reference ran such judges with ``--no-think``, which passes
``chat_template_kwargs={"enable_thinking": False}`` to vLLM (``scripts/panel_judge.py`` of
fractalego/Sleight-of-Word). We pass the same template variable, or the model's equivalent: the
first of :data:`SWITCHES` whose value changes the rendered prompt. A template that reacts to none
still receives ``enable_thinking`` (as the reference's did, harmlessly) and the setting says so, so a
table never claims a judge "did not think" when its template had no way to be told.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from dataclasses import dataclass, field

from tamperbench.errors import UserError
from tamperbench.labels import THINKING_MODES, ThinkingMode

# template variables that switch a model's reasoning trace: Qwen3 / Gemma-style, then DeepSeek-V3.1 / Granite
SWITCHES: tuple[str, ...] = ("enable_thinking", "thinking")
_PROBE = [{"role": "user", "content": "x"}]


@dataclass(frozen=True)
class ThinkingSetting:
    """What one judge was told about thinking, and whether its template listened (stored with each vote)."""

    mode: ThinkingMode
    template_kwargs: dict = field(default_factory=dict)
    effect: str = "template default"  # "switched by <var>", "template ignores it", "server-side template"

    @property
    def text(self) -> str:
        if self.mode == "default":
            return "default (template's own)"
        kv = ", ".join(f"{k}={v}" for k, v in self.template_kwargs.items())
        return f"{self.mode} ({kv}; {self.effect})"


def parse_thinking(values: Sequence[str] | None, judges: Sequence[str]) -> dict[str, ThinkingMode]:
    """``--thinking`` values (``off`` for every judge, or ``JUDGE=off`` for one) -> mode per judge."""
    modes: dict[str, ThinkingMode] = dict.fromkeys(judges, "default")
    for raw in values or ():
        judge, sep, mode = raw.rpartition("=")
        if mode not in THINKING_MODES:
            raise UserError(f"--thinking: '{raw}': the mode must be one of {', '.join(THINKING_MODES)}")
        if not sep:
            modes = dict.fromkeys(judges, mode)  # type: ignore[arg-type]
        elif judge not in modes:
            raise UserError(f"--thinking: '{raw}': {judge!r} is not one of the --judge values")
        else:
            modes[judge] = mode  # type: ignore[assignment]
    return modes


def thinking_setting(backend: object, mode: ThinkingMode) -> ThinkingSetting:
    """The template kwargs that put ``backend``'s judge in ``mode``, found by rendering a probe prompt."""
    if mode == "default":
        return ThinkingSetting("default")
    want = mode == "on"
    if getattr(backend, "server_side_template", False):
        return ThinkingSetting(mode, {"enable_thinking": want}, "sent as chat_template_kwargs; the server's template")
    render: Any = getattr(backend, "chat_text", None)
    for name in SWITCHES if render is not None else ():
        try:
            on, off = (render(_PROBE, template_kwargs={name: v}) for v in (True, False))
        except UserError:
            break  # no chat template at all (--chat-template none): nothing to switch
        if on != off:
            return ThinkingSetting(mode, {name: want}, f"switched by {name}")
    return ThinkingSetting(mode, {"enable_thinking": want}, "the template ignores it")
