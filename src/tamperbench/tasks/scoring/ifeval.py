"""IFEval: the verifiable instructions, checked by an existing implementation of the checkers.

WHY a dependency: IFEval's 25 checkers (Zhou et al. 2023, google-research instruction_following_eval)
are subtle (word counting, sentence splitting, language detection); re-writing them would make a
different benchmark. We use the checker classes of ``if-verifiable`` (pinned 0.1.2, extra
``tamperbench[bench]``), a packaged copy of Google's ``instructions.py``, and run the evaluation
loop of Google's ``evaluation_lib`` here: strict = the reply as is; loose = any of the reply, the
reply without its first line, without its last line, without both, each also with '*' removed.

One checker, ``length_constraints:number_sentences``, needs NLTK's 'punkt' sentence model, which
is data, not code, and cannot be installed from a package registry. When it is missing that
instruction is reported unscorable (``None``) and the prompt-level verdict is ``None``, never a
silent pass or fail. Install it with ``python -m nltk.downloader punkt`` where the NLTK data host
is reachable, or point ``NLTK_DATA`` at a copy.
"""

from __future__ import annotations

from typing import Any

INSTRUCTION_IDS = (
    "keywords:existence", "keywords:frequency", "keywords:forbidden_words", "keywords:letter_frequency",
    "language:response_language", "length_constraints:number_sentences", "length_constraints:number_paragraphs",
    "length_constraints:number_words", "length_constraints:nth_paragraph_first_word",
    "detectable_content:number_placeholders", "detectable_content:postscript", "detectable_format:number_bullet_lists",
    "detectable_format:constrained_response", "detectable_format:number_highlighted_sections",
    "detectable_format:multiple_sections", "detectable_format:json_format", "detectable_format:title",
    "combination:two_responses", "combination:repeat_prompt", "startend:end_checker",
    "change_case:capital_word_frequency", "change_case:english_capital", "change_case:english_lowercase",
    "punctuation:no_comma", "startend:quotation",
)
CHECKERS_PACKAGE = "if-verifiable==0.1.2"


def unknown_instructions(ids: list[str]) -> list[str]:
    return [i for i in ids if i not in INSTRUCTION_IDS]


def _registry() -> dict[str, Any]:
    from tamperbench.errors import UserError

    import importlib.util
    import sys
    import types

    try:
        if "if_verifiable" not in sys.modules:
            # The package's __init__ imports its hub loader (``datasets``, seconds of import time) that
            # scoring never uses; a bare package module lets us import only the checker submodules.
            spec = importlib.util.find_spec("if_verifiable")
            if spec is None or not spec.submodule_search_locations:
                raise ImportError("if_verifiable")
            package = types.ModuleType("if_verifiable")
            package.__path__ = list(spec.submodule_search_locations)
            sys.modules["if_verifiable"] = package
        from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT
    except ImportError:
        raise UserError(f"ifeval scoring needs the IFEval checkers: pip install {CHECKERS_PACKAGE} "
                        "(or tamperbench[bench])") from None
    return INSTRUCTION_DICT


def loose_variants(response: str) -> list[str]:
    """Google's evaluation_lib loose transformations (the reply itself comes first)."""
    lines = response.split("\n")
    remove_first = "\n".join(lines[1:]).strip()
    remove_last = "\n".join(lines[:-1]).strip()
    remove_both = "\n".join(lines[1:-1]).strip()
    return [response, response.replace("*", ""), remove_first, remove_last, remove_both,
            remove_first.replace("*", ""), remove_last.replace("*", ""), remove_both.replace("*", "")]


def check(prompt: str, ids: tuple[str, ...], kwargs: tuple[dict[str, Any], ...], response: str) -> dict[str, Any]:
    """Per-instruction strict/loose results (None = unscorable here) and prompt-level verdicts."""
    registry = _registry()
    strict: list[bool | None] = []
    loose: list[bool | None] = []
    notes: list[str] = []
    for inst_id, kw in zip(ids, kwargs):
        checker = registry[inst_id](inst_id)
        checker.build_description(**{k: v for k, v in kw.items() if v is not None})
        args = checker.get_instruction_args()
        if args and "prompt" in args:
            checker.build_description(prompt=prompt)
        try:
            strict.append(bool(response.strip() and checker.check_following(response)))
            loose.append(any(v.strip() and checker.check_following(v) for v in loose_variants(response)))
        except LookupError as err:  # NLTK data (punkt) missing: unscorable, not failed
            strict.append(None)
            loose.append(None)
            notes.append(f"{inst_id}: unscorable here ({str(err).strip().splitlines()[0] or 'NLTK data missing'})")

    def prompt_level(values: list[bool | None]) -> bool | None:
        if any(v is False for v in values):
            return False
        return None if any(v is None for v in values) else True

    return {"instructions": list(ids), "strict": strict, "loose": loose,
            "prompt_strict": prompt_level(strict), "prompt_loose": prompt_level(loose), "notes": notes}
