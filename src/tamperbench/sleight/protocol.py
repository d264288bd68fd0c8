"""Sleight of Word's protocol data (the paper's Appendices E and F: questions and words) and its
presets (``paper``, ``quick``, ``demo``). The run spec they resolve into is in :mod:`sleight.spec`."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, ConfigDict

from tamperbench.errors import UserError

ENTITY = "Mandela effect"
WINDOW = 8  # tokens after each swap (protocol, "Internal signals")
TOPK = 20  # candidates for the renormalised entropy (vLLM's max_logprobs default in the paper)


@lru_cache(maxsize=None)
def _load(name: str) -> dict:
    return json.loads(resources.files("tamperbench.sleight").joinpath("data", name).read_text("utf-8"))


def protocol_questions() -> list[tuple[str, str]]:
    """The 100 fixed questions of Appendix F as (id, text), in the protocol's order."""
    return [(q["id"], q["text"]) for q in _load("questions.json")["questions"]]


def protocol_words() -> list[str]:
    """The 100 neutral substitution words of Appendix E, in the protocol's order."""
    return list(_load("words.json")["words"])


def entity_phrase() -> str:
    return _load("words.json")["entity"]


class Preset(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    question_ids: tuple[str, ...]
    substitutions: tuple[str, ...]
    max_new_tokens: int


def _paper() -> Preset:
    return Preset(
        name="paper",
        question_ids=tuple(i for i, _ in protocol_questions()),
        substitutions=(entity_phrase(), *protocol_words()),
        max_new_tokens=256,
    )


# Questions whose greedy SmolLM2-135M-Instruct answers use "the" early (measured with the
# embedded model, 96 new tokens), so the quick preset exercises swaps, mentions and matched branches.
QUICK_QUESTIONS = ("q006", "q000", "q066", "q026")
QUICK_WORDS = (ENTITY, "scarf", "canoe")


def _quick() -> Preset:
    return Preset(name="quick", question_ids=QUICK_QUESTIONS, substitutions=QUICK_WORDS, max_new_tokens=96)


def _demo() -> Preset:
    """``tamperbench demo``: two of the quick questions, the entity phrase and one planted word, 64 tokens."""
    return Preset(name="demo", question_ids=QUICK_QUESTIONS[:2], substitutions=QUICK_WORDS[:2], max_new_tokens=64)


PRESETS = {"paper": _paper, "quick": _quick, "demo": _demo}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise UserError(f"--preset: unknown preset '{name}' (choose one of: {', '.join(PRESETS)})")
    return PRESETS[name]()
