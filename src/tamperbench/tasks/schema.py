"""One canonical item schema that every benchmark adapter fills.

OWMI (Ferrara, arXiv:2608.20569, Section 4) attaches to benchmarks people already use and keeps their prompts and
task scoring. Suites therefore never see a benchmark's own file layout: each adapter turns its
dataset's original published schema into :class:`BenchItem`, and the scorer for
``item.scoring`` applies that benchmark's own rule. Items are frozen so a cached baseline pass,
an intervened pass and a sham pass provably see the same item.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tamperbench.tasks.prompts import render_prompt

Domain = Literal["knowledge", "commonsense", "arithmetic", "code", "instruction_following"]

ScoringRule = Literal[
    "mc_letter_exact",  # option-letter coercion + exact 0/1 match (MMLU, ARC, HellaSwag, ...)
    "mc_letter_any_true",  # TruthfulQA MC2 from text: the chosen letter is one of the true answers
    "gsm8k_em_f1",  # max(normalised exact match, token F1) on the answer after '####'
    "math_boxed_equiv",  # last \boxed{} answer, Hendrycks strip_string / is_equiv
    "code_tests",  # run the program against the benchmark's tests in the sandbox
    "ifeval",  # verifiable instructions (strict and loose)
]

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Provenance(_Frozen):
    """Where one item came from, precisely enough to fetch the same bytes again."""

    dataset: str = Field(description="Benchmark name as published, e.g. 'cais/mmlu' or 'openai/gsm8k'.")
    config: str | None = Field(default=None, description="Dataset configuration / subset, e.g. 'all', 'main'.")
    split: str = Field(description="Split the item belongs to, e.g. 'test', 'validation'.")
    original_id: str = Field(description="The item's id in the original release (or its 0-based row index).")
    source: str = Field(description="File path or hub id the item was read from.")
    sha256: str = Field(description="sha256 of the source file's bytes (hub: of the cached data file).")
    line: int | None = Field(default=None, description="1-based line / row in the source file.")


class CodeTests(_Frozen):
    """Everything needed to run a code answer: program = prompt + completion + setup + test + check."""

    test: str = Field(description="Test code as released (HumanEval 'test' with check(); MBPP asserts).")
    entry_point: str | None = Field(default=None, description="Function the tests call (HumanEval).")
    setup: str = Field(default="", description="Code run before the tests (MBPP test_setup_code / imports).")
    prefix_prompt: bool = Field(
        default=False, description="True when the completion continues the prompt (HumanEval), so both are run."
    )
    reference: str | None = Field(default=None, description="The benchmark's canonical solution, if released.")


class IFEvalSpec(_Frozen):
    """IFEval's verifiable instructions for one prompt."""

    instruction_id_list: tuple[str, ...]
    kwargs: tuple[dict[str, Any], ...]


class BenchItem(_Frozen):
    """One benchmark item, whatever its source format.

    ``answer`` holds the gold in the form the scorer compares against: an option letter for
    multiple choice, the final answer string for GSM8K, the boxed answer for MATH. Code items
    carry ``tests`` instead; IFEval items carry ``ifeval``. ``reference`` keeps the released
    worked solution or explanation verbatim (GSM8K rationale, MATH solution) for auditing.
    """

    id: str = Field(description="Stable id: '<benchmark>/<original id>'.")
    benchmark: str = Field(description="Adapter name, e.g. 'mmlu', 'gsm8k'.")
    domain: Domain
    scoring: ScoringRule
    system: str | None = None
    instruction: str | None = Field(default=None, description="Task instruction placed before the question.")
    context: str | None = Field(default=None, description="Passage / context the question refers to.")
    question: str
    choices: tuple[str, ...] | None = Field(default=None, description="Options in presented order (A, B, ...).")
    answer: str | None = None
    true_letters: tuple[str, ...] | None = Field(
        default=None, description="All correct letters (TruthfulQA MC2); None when exactly one is correct."
    )
    reference: str | None = None
    tests: CodeTests | None = None
    ifeval: IFEvalSpec | None = None
    meta: dict[str, str] = Field(default_factory=dict, description="Subject, level, category: for grouping.")
    provenance: Provenance

    @property
    def letters(self) -> tuple[str, ...]:
        """Option letters in presented order ('A', 'B', ...); empty for non-multiple-choice items."""
        return tuple(LETTERS[: len(self.choices)]) if self.choices else ()

    def prompt_text(self) -> str:
        """The user-turn text: instruction, context, question and lettered options, as the benchmark poses it."""
        return render_prompt(self)
