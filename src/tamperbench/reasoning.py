"""Reasoning formats: split a model's output into its thinking and its answer before scoring or judging.

WHY: reasoning models write a trace before the answer, and a scorer that reads the trace as the
answer reports nonsense (the Exact Words author's first leaderboard had DeepSeek-R1 at 0% for this
reason). Formats handled, each tested on literal text:

* ``think``: ``<think> ... </think>`` (DeepSeek-R1, Qwen3, ...; also ``<thinking>``). A closing
  tag without an opening one (templates that open the block inside the prompt) keeps only the
  text after the last closing tag.
* ``harmony``: gpt-oss's channels, ``<|channel|>analysis<|message|> ... <|end|><|start|>assistant
  <|channel|>final<|message|> ... <|return|>``. The analysis (and commentary) channels are thinking,
  the final channel is the answer. These markers are *special tokens*: a plain
  ``decode(..., skip_special_tokens=True)`` deletes them and glues the trace to the answer, so
  :func:`decode_keeping_channels` decodes with them kept when the ids carry channel markers.
* ``harmony-stripped``: that glued form, ``analysis...assistantfinal...``, as text decoded with the
  special tokens dropped arrives today; recognised so such text is never scored as the answer.

``answer`` is None when the output is reasoning that never reached an answer (an unclosed
``<think>``, or harmony channels without a final one): the model did not answer within its budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CHANNEL = "<|channel|>"
_THINK_BLOCK = re.compile(r"<(think|thinking)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(?:think|thinking)>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(?:think|thinking)>", re.IGNORECASE)
_HARMONY = re.compile(r"<\|channel\|>\s*(\w+)[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>(.*?)"
                      r"(?=<\|end\|>|<\|return\|>|<\|call\|>|<\|start\|>|<\|channel\|>|\Z)", re.DOTALL)
_HARMONY_STRIPPED = re.compile(r"^\s*analysis(.*?)assistant\s*final(.*)\Z", re.DOTALL)
_HARMONY_STRIPPED_OPEN = re.compile(r"^\s*analysis(?=[A-Z])(.*)\Z", re.DOTALL)


@dataclass(frozen=True)
class Reasoning:
    """A model output split into what it thought and what it answered."""

    answer: str | None  # None: reasoning that never reached an answer
    thinking: str  # "" when the output had no reasoning
    format: str  # none | think | harmony | harmony-stripped

    @property
    def has_thinking(self) -> bool:
        return self.format != "none"


def split_reasoning(text: str) -> Reasoning:
    """Split ``text`` (a raw model output) into thinking and answer; see the module docstring."""
    if CHANNEL in text:
        return _split_harmony(text)
    if _THINK_OPEN.search(text) or _THINK_CLOSE.search(text):
        return _split_think(text)
    m = _HARMONY_STRIPPED.match(text)
    if m:
        return Reasoning(answer=m.group(2).strip(), thinking=m.group(1).strip(), format="harmony-stripped")
    m = _HARMONY_STRIPPED_OPEN.match(text)
    if m:  # "analysisWe need to ..." with no final channel: a trace that never answered
        return Reasoning(answer=None, thinking=m.group(1).strip(), format="harmony-stripped")
    return Reasoning(answer=text, thinking="", format="none")


def _split_harmony(text: str) -> Reasoning:
    thinking: list[str] = []
    finals: list[str] = []
    for m in _HARMONY.finditer(text):
        (finals if m.group(1).lower() == "final" else thinking).append(m.group(2).strip())
    answer = "\n".join(finals).strip() if finals else None
    return Reasoning(answer=answer, thinking="\n\n".join(t for t in thinking if t), format="harmony")


def _split_think(text: str) -> Reasoning:
    thinking = [m.group(2).strip() for m in _THINK_BLOCK.finditer(text)]
    rest = _THINK_BLOCK.sub("", text)
    if _THINK_OPEN.search(rest):  # opened, never closed: no answer
        head, tail = _THINK_OPEN.split(rest, maxsplit=1)
        return Reasoning(answer=None, thinking="\n\n".join(thinking + [tail.strip()]).strip(), format="think")
    if _THINK_CLOSE.search(rest):  # the template opened the block in the prompt
        *before, after = _THINK_CLOSE.split(rest)
        thinking = ["".join(before).strip()] + thinking
        rest = after
    return Reasoning(answer=rest.strip(), thinking="\n\n".join(t for t in thinking if t), format="think")


def strip_reasoning(text: str) -> str:
    """The answer part of ``text`` ("" when the model never answered)."""
    return split_reasoning(text).answer or ""


def has_reasoning(text: str) -> bool:
    """Whether ``text`` carries a reasoning trace in a known format (an open one included)."""
    return split_reasoning(text).has_thinking


def decode_keeping_channels(tokenizer, ids) -> str:
    """Decode ``ids`` like ``skip_special_tokens=True``, except that harmony channel markers are kept.

    With the markers (``<|channel|>`` ...) present in the ids, every special token is kept so
    :func:`split_reasoning` can tell the analysis channel from the final one; otherwise the usual
    decode without special tokens is returned.
    """
    full = tokenizer.decode(list(ids), skip_special_tokens=False)
    if CHANNEL in full:
        return full
    return tokenizer.decode(list(ids), skip_special_tokens=True)
