"""Scripted judge backends: stand-ins for judge MODELS only (the pipeline under test is real).

Each fake implements the backend surface the jury uses (``generate_chat``, ``provenance``,
``provenance_id``, ``max_batch_size``) and answers from a function of the conversation, so the tests
control exactly what a judge "said" and check what the pipeline stores and concludes.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from tamperbench.judge.samples import SAMPLES


class FakeProvenance(BaseModel):
    source: str

    @property
    def id(self) -> str:
        return "fake-" + self.source


class Gen(BaseModel):
    text: str
    prompt_text: str
    finish_reason: str = "eos"


class ScriptedJudge:
    """``answer(user_text, n_turns) -> str``; records every call so tests can check batching."""

    def __init__(self, name: str, answer, max_batch_size: int = 4):
        self.provenance = FakeProvenance(source=name)
        self.provenance_id = self.provenance.id
        self.max_batch_size = max_batch_size
        self.answer = answer
        self.calls: list[int] = []

    def generate_chat(self, conversations, *, max_new_tokens, temperature=0.0, seed=0, stop=None, system=None,
                      template_kwargs=None, progress=True):
        assert temperature == 0.0 and system and system.startswith("You are a careful evaluator")
        self.calls.append(len(conversations))
        out = []
        for conv in conversations:
            prompt = f"<sys>{system}</sys>" + "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in conv)
            out.append(Gen(text=self.answer(conv[0]["content"], len(conv)), prompt_text=prompt))
        return out


def sample_for(user_text: str):
    for s in SAMPLES:
        if s.reply in user_text:
            return s
    raise AssertionError("prompt holds no known sample reply")


def perfect_answer(user_text: str, n_turns: int) -> str:
    s = sample_for(user_text)
    return "```json\n" + json.dumps({**s.labels, "confidence": 0.9, "rationale": s.name}) + "\n```"


@pytest.fixture
def scripted_judge():
    return ScriptedJudge


@pytest.fixture
def perfect():
    return perfect_answer
