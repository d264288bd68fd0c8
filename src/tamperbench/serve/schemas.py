"""Request bodies of the OpenAI-compatible endpoints, with every size bounded.

Why strict bounds here: request bodies come from anyone who can reach the port. A field outside its
range is a 400 that names the field (pydantic's message), never a crash or a silent clamp. Unknown
fields are ignored, as OpenAI-compatible servers do, because client libraries send extras.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_TOKENS_CAP = 4096
MAX_TOP_LOGPROBS = 20
MAX_STOP = 4
MAX_MESSAGES = 256
MAX_TEXT = 1_000_000  # characters in one message or prompt


def _stops(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    stops = [value] if isinstance(value, str) else list(value)
    if len(stops) > MAX_STOP:
        raise ValueError(f"at most {MAX_STOP} stop sequences")
    if any(not s or len(s) > 256 for s in stops):
        raise ValueError("each stop sequence must have 1 to 256 characters")
    return stops


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: str = Field(max_length=MAX_TEXT)


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str = Field(max_length=512)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)  # torch's generator takes a 64-bit seed
    stop: list[str] = Field(default_factory=list)
    n: Literal[1] = 1
    stream: Literal[False] = False

    @field_validator("stop", mode="before")
    @classmethod
    def _check_stop(cls, v):
        return _stops(v)


class ChatRequest(_Common):
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS_CAP)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS_CAP)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)

    @property
    def budget(self) -> int:
        return self.max_completion_tokens or self.max_tokens or 256


class CompletionRequest(_Common):
    prompt: str | list[int] = Field(max_length=MAX_TEXT)
    max_tokens: int = Field(16, ge=0, le=MAX_TOKENS_CAP)
    logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool = False
    # vLLM's extension, kept under its name: tokens in log-probs as "token_id:<id>", so a client
    # with the model's tokenizer gets exact ids (black-box Sleight of Word needs them).
    return_tokens_as_token_ids: bool = False
