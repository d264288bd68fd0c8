"""Hybrid-thinking judges, read from their chat template: ``judge run --preset paper`` switches them off.

WHY: the reference's panel script (``scripts/panel_judge.py`` of fractalego/Sleight-of-Word) has
``--no-think``, which disables "a hybrid judge's thinking channel (Qwen3) so it emits JSON directly" by
passing ``chat_template_kwargs={"enable_thinking": False}``. A juror left thinking spends its 256 new
tokens on a trace; the reference parse then finds no JSON and the vote is unparsed, i.e. "no".

"Hybrid" is a property of the chat template, so it is read from the template text, which works the
same for a local model and for a served one whose tokenizer is named (``?tokenizer=SPEC``): the
template reads a thinking switch (:data:`SWITCHES`: ``enable_thinking`` for Qwen3, ``thinking`` for
DeepSeek-V3.1 / Granite) as a free variable (jinja2's ``meta.find_undeclared_variables``). Whether it
thinks *by default* comes from rendering a probe conversation with transformers' own renderer: the
unswitched prompt ends with an open ``<think>`` (DeepSeek-R1), or equals the switched-on prompt and
differs from the switched-off one (Qwen3, which closes an empty block only when told not to think).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tamperbench.judge.thinking import SWITCHES

_PROBE = [{"role": "user", "content": "x"}]
_OPEN_TRACE = re.compile(r"<(think|thinking|reasoning)>\s*$")
THINKING_BUDGET = 256  # the reference's max_tokens: a default-thinking juror under it gets a warning


@dataclass(frozen=True)
class TemplateThinking:
    """What one judge's chat template says about thinking."""

    source: str  # where the template text came from, or why there is none
    switch: str | None = None  # the template variable that switches thinking (None: not a hybrid template)
    thinks_by_default: bool | None = None  # None: unknown (no template, or it did not render)
    read: bool = True  # False: no template text to read here (a served model without ?tokenizer=)

    @property
    def hybrid(self) -> bool:
        return self.switch is not None

    @property
    def text(self) -> str:
        kind = f"hybrid (reads {self.switch})" if self.hybrid else "not hybrid" if self.read else "not read"
        default = {True: "thinks by default", False: "does not think by default", None: "default unknown"}
        return f"{kind}, {default[self.thinks_by_default]}; from {self.source}"


def template_text(backend: object) -> tuple[str | None, str]:
    """(chat template text, where it came from) of a loaded judge; text None when it cannot be read here."""
    served = bool(getattr(backend, "server_side_template", False))
    tpl = getattr(backend, "template", None)
    mode = getattr(tpl, "mode", None)
    if mode == "file" and isinstance(getattr(tpl, "text", None), str):
        label = str(getattr(tpl, "label", "file"))  # file:<digest>:<path> for a file given on the command line
        return tpl.text, f"--chat-template {label.split(':', 2)[-1]}"  # type: ignore[union-attr]
    if mode == "none":
        return None, "--chat-template none (a raw prompt, nothing to switch)"
    text = getattr(getattr(backend, "tokenizer", None), "chat_template", None)
    if isinstance(text, Mapping):  # tokenizers with named templates: the default one is the chat template
        text = text.get("default")
    if isinstance(text, str) and text.strip():
        return text, ("the ?tokenizer= model (the server applies its own)" if served else "the model's tokenizer")
    if served:
        return None, "the server (not readable here: add ?tokenizer=SPEC to the judge spec)"
    return None, "nowhere (no chat template found)"


def inspect_template(text: str | None, source: str = "given") -> TemplateThinking:
    """Whether ``text`` is a hybrid-thinking chat template, and whether it thinks when not told."""
    if text is None:
        return TemplateThinking(source, read=False)
    switch = _switch_of(text)
    default = _render(text, {})
    on, off = (_render(text, {switch: True}), _render(text, {switch: False})) if switch else (None, None)
    thinks: bool | None
    if default is None:
        thinks = None
    elif _OPEN_TRACE.search(default):
        thinks = True  # the prompt itself opens the trace (DeepSeek-R1 style)
    elif switch and on is not None and off is not None and on != off:
        thinks = True if default == on else False if default == off else None
    else:
        thinks = False
    return TemplateThinking(source, switch, thinks)


def judge_thinking(backend: object) -> TemplateThinking:
    """:func:`inspect_template` of a loaded judge's own template."""
    text, source = template_text(backend)
    return inspect_template(text, source)


def _switch_of(text: str) -> str | None:
    try:
        from jinja2 import meta
        from transformers.utils.chat_template_utils import _compile_jinja_template

        env = _compile_jinja_template(text).environment
        names = meta.find_undeclared_variables(env.parse(text))
    except Exception:  # noqa: BLE001 - a template jinja cannot parse: fall back to the word itself
        names = {w for w in SWITCHES if re.search(rf"\b{w}\b", text)}
    return next((w for w in SWITCHES if w in names), None)


def _render(text: str, kwargs: dict) -> str | None:
    try:
        from transformers.utils.chat_template_utils import render_jinja_template

        out, _ = render_jinja_template([_PROBE], chat_template=text, add_generation_prompt=True, bos_token="",
                                       eos_token="", **kwargs)
        return out[0]
    except Exception:  # noqa: BLE001 - a template that needs more context than the probe: unknown
        return None


def resolve_paper_thinking(cfg, jury: Mapping[str, object]):
    """(``cfg`` with thinking off for each hybrid juror named in ``cfg.no_think_hybrids``, as the reference's
    ``--no-think``; one line per juror with its thinking setting and template; warnings for a juror that still
    thinks by default under a budget of at most :data:`THINKING_BUDGET` new tokens)."""
    from tamperbench.judge.thinking import thinking_setting

    found = {j: judge_thinking(b) for j, b in jury.items()}
    auto = {j for j in cfg.no_think_hybrids if j in found and found[j].hybrid}
    modes = {**dict(cfg.thinking), **dict.fromkeys(auto, "off")}
    cfg = cfg.model_copy(update={"thinking": tuple((j, m) for j, m in modes.items() if m != "default"),
                                 "no_think_hybrids": ()})
    lines, warnings = [], []
    for judge, backend in jury.items():
        info, mode = found[judge], cfg.thinking_of(judge)
        why = " [--preset paper: a hybrid template, off as the reference's --no-think]" if judge in auto else ""
        setting = thinking_setting(backend, mode)
        how = f" ({', '.join(f'{k}={v}' for k, v in setting.template_kwargs.items())}; {setting.effect})" \
            if mode != "default" else " (the template's own)"
        lines.append(f"{judge}={mode}{how}{why}; template: {info.text}")
        still = info.thinks_by_default and (mode != "off" or not info.hybrid)
        if still and cfg.max_new_tokens <= THINKING_BUDGET:
            how = "it cannot be switched off" if mode == "off" else f"thinking is {mode} (pass --thinking {judge}=off)"
            warnings.append(f"WARNING: judge {judge}: its chat template thinks by default and {how}; with "
                            f"{cfg.max_new_tokens} new tokens a trace can fill the budget before the JSON verdict, "
                            "which is then an unparsed vote")
    return cfg, lines, warnings
