"""Score a code answer by running the benchmark's tests on it in the sandbox.

Program assembly follows each benchmark's harness:

- HumanEval (openai/human-eval ``check_program``): prompt + completion + test + ``check(entry_point)``.
  A chat model often returns the whole function instead of a completion; when the extracted code
  itself defines ``entry_point`` it is appended after the prompt (the prompt's docstring-only
  definition is then replaced), and the verdict names which assembly was used.
- MBPP: test_setup_code / test_imports + code + the assert statements.

The code is the first fenced block (```python ... ```) of the reply when there is one, else the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tamperbench.tasks.schema import BenchItem
from tamperbench.tasks.scoring.sandbox import Limits, RunResult, run_program

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S | re.I)


def extract_code(response: str) -> str:
    m = _FENCE.search(response)
    return m.group(1) if m else response


@dataclass(frozen=True)
class Program:
    source: str
    assembly: str  # 'prompt+completion', 'prompt+function', 'code+tests'


def build_program(item: BenchItem, completion: str) -> Program:
    tests = item.tests
    if tests is None:
        raise ValueError(f"{item.id}: not a code item")
    if tests.prefix_prompt:
        entry = tests.entry_point or ""
        if re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", completion, re.M):
            body, assembly = item.question + "\n" + completion, "prompt+function"
        else:
            body, assembly = item.question + completion, "prompt+completion"
        source = body + "\n\n" + tests.test + "\n\n" + f"check({entry})\n"
        return Program(source, assembly)
    source = "\n".join(part for part in (tests.setup, completion, tests.test) if part) + "\n"
    return Program(source, "code+tests")


def run_tests(item: BenchItem, completion: str, limits: Limits = Limits()) -> tuple[Program, RunResult]:
    program = build_program(item, completion)
    return program, run_program(program.source, limits)
