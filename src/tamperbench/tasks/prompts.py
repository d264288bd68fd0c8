"""Render a :class:`BenchItem` as the user-turn text a chat model sees.

Kept apart from the schema so the wording can be read and reviewed in one place. The wording
follows the common zero-shot generative formats (lettered options, 'Answer with the letter'),
because OWMI scores free text, not log-likelihoods.

Below the schema (bench/schema.py imports it; nothing here imports the schema): an item is anything
with the fields of :class:`PromptItem`, which ``BenchItem`` has.
"""

from __future__ import annotations

from typing import Protocol


class PromptItem(Protocol):
    """The fields of a ``BenchItem`` that its prompt is made of."""

    instruction: str | None
    context: str | None
    question: str
    choices: tuple[str, ...] | None

    @property
    def letters(self) -> tuple[str, ...]: ...


def render_prompt(item: PromptItem) -> str:
    parts: list[str] = []
    if item.instruction:
        parts.append(item.instruction)
    if item.context:
        parts.append(item.context)
    parts.append(item.question)
    if item.choices:
        parts.append("\n".join(f"{letter}. {text}" for letter, text in zip(item.letters, item.choices)))
        parts.append(mc_answer_line(item))
    return "\n\n".join(p.strip("\n") for p in parts if p)


def mc_answer_line(item: PromptItem) -> str:
    """The answer-format line under the options; the scorer coerces the reply to one of these letters."""
    letters = item.letters
    return f"Answer with the letter of the correct option ({letters[0]}-{letters[-1]})."
