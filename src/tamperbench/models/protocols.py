"""What a backend can do, as small runtime-checkable protocols, one per capability.

Why protocols and not one base class: an HTTP server can chat but cannot be steered token by
token; a vLLM engine can score but offers no hooks. Each suite states the capabilities it needs
(:func:`require`), and a backend that lacks one is refused up front with one line naming the
capability and what to use instead, instead of an ``AttributeError`` an hour into a run.

This module imports neither torch nor transformers, so a CLI command or a remote backend can use
it without paying for them. Tensor types are written as strings for that reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from tamperbench.errors import UserError

__all__ = [
    "Capability", "ChatBackend", "Generation", "GenerationProgress", "GrammarBackend", "HookBackend",
    "MemoryRowsBackend",
    "ProgressListener", "ScoringBackend", "StepBackend", "capabilities", "ensure_fits", "require",
]


class Generation(BaseModel):
    """One generated answer and the exact prompt that produced it."""

    text: str  # decoded new text, stop string (and everything after it) removed
    token_ids: list[int]  # new token ids (through the token that completed a stop string)
    prompt_text: str
    prompt_ids: list[int]
    finish_reason: Literal["eos", "length", "stop"]


@dataclass(frozen=True)
class GenerationProgress:
    """Where one ``generate_chat`` call stands, reported after every decoding step to the caller's
    ``progress`` listener. Why an event and not a bar: the model layer knows nothing of the
    terminal; a runner subscribes and draws its own bar or ETA (tamperbench.progress)."""

    done: int  # conversations finished
    total: int  # conversations in the call
    tokens: int  # tokens decoded so far in the call
    seconds: float  # since the call began


ProgressListener = Callable[[GenerationProgress], None]


@runtime_checkable
class ChatBackend(Protocol):
    """Chat generation: what quote and the jury need. Also the base every backend offers."""

    provenance: Any  # a ModelProvenance
    max_context: int  # the model's context length in tokens (prompt + generated)

    @property
    def provenance_id(self) -> str: ...

    def chat_ids(self, messages: Sequence[dict], *, system: str | None = None,
                 template_kwargs: dict | None = None) -> list[int]: ...

    def chat_text(self, messages: Sequence[dict], *, system: str | None = None,
                  template_kwargs: dict | None = None) -> str: ...

    def generate_chat(self, conversations: Sequence[Sequence[dict]], *, max_new_tokens: int,
                      temperature: float = 0.0, seed: int | Sequence[int] = 0, stop: list[str] | None = None,
                      system: str | None = None, template_kwargs: dict | None = None,
                      progress: ProgressListener | None = None) -> list[Generation]: ...

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """Token ids -> text, so suites need not touch a tokenizer object."""
        ...

    def encode(self, text: str) -> list[int]:
        """Text -> token ids without special tokens."""
        ...


@runtime_checkable
class ScoringBackend(Protocol):
    """Teacher-forced scoring: per-token log-probs, and whole next-token distributions streamed
    in chunks (OWMI's Jensen-Shannon divergence) so memory does not grow with length x vocab."""

    def score(self, prompt_ids: Sequence[int], continuation_ids: Sequence[int], *,
              chunk_size: int = 128) -> list[float]: ...

    def next_token_distributions(self, input_ids: Sequence[int], *, chunk_size: int = 128,
                                 start: int = 0) -> Iterator[tuple[list[int], "Any"]]:
        """Yields (positions, float32 log-probs [len(positions), vocab]): row i is the
        distribution of the token after ``input_ids[positions[i]]``, for positions >= start."""
        ...


@runtime_checkable
class StepBackend(Protocol):
    """Step decoding with force / fork / rollback: the in-process sleight engine."""

    def step_decoder(self, *, topk: int = 20, capacity: int | None = None) -> Any: ...


@runtime_checkable
class HookBackend(Protocol):
    """Hooks and activation capture on the model's modules (OWMI)."""

    model: Any

    def hooks(self, hooks: Sequence[tuple[str, Any]]) -> AbstractContextManager[None]: ...

    def capture(self, sites: Sequence[str], input_ids: Any) -> dict[str, Any]: ...

    def capturing(self, sites: Sequence[str]) -> AbstractContextManager[dict[str, list[Any]]]: ...


@runtime_checkable
class MemoryRowsBackend(Protocol):
    """Inside ``rows_from_memory()``, a generation call decodes as many of its prompts at once as
    memory allows (models/memory.py), not at most the load-time batch size: a local model sizes its
    rows itself. The quote runner opens it when the user gave no ``--batch-size``."""

    def rows_from_memory(self) -> AbstractContextManager[None]: ...


@runtime_checkable
class GrammarBackend(Protocol):
    """``generate_chat(..., grammar=JsonGrammar)`` decodes each answer under a JSON schema: a token
    bitmask applied at every step (models/decoding/grammar.py, llguidance). A local model's step
    decoder can; an HTTP server's sampler is out of reach."""

    grammar_decoding: bool


class Capability(str, Enum):
    """Capability names, with the protocol that checks each and the advice when one is missing."""

    CHAT = "chat generation"
    SCORE = "teacher-forced scoring"
    STEP = "step decoding (in-process engine)"
    HOOKS = "hooks and activation capture"
    MEMORY_ROWS = "rows sized by free memory"
    GRAMMAR = "grammar-constrained decoding"

    @property
    def protocol(self) -> type:
        return {Capability.CHAT: ChatBackend, Capability.SCORE: ScoringBackend,
                Capability.STEP: StepBackend, Capability.HOOKS: HookBackend,
                Capability.MEMORY_ROWS: MemoryRowsBackend, Capability.GRAMMAR: GrammarBackend}[self]

    @property
    def instead(self) -> str:
        return {
            Capability.CHAT: "use any model spec",
            Capability.SCORE: "use a local model (embedded, a directory, a .gguf file or org/name)",
            Capability.STEP: "use a local model or the black-box engine",
            Capability.HOOKS: "use a local model (embedded, a directory, a .gguf file or org/name)",
            Capability.MEMORY_ROWS: "give --batch-size, or use a local model",
            Capability.GRAMMAR: "use a local model (embedded, a directory, a .gguf file or org/name)",
        }[self]


def capabilities(backend: object) -> list[Capability]:
    """The capabilities a backend offers, in declaration order."""
    return [c for c in Capability if isinstance(backend, c.protocol)]


def _describe(backend: object) -> str:
    prov = getattr(backend, "provenance", None)
    return str(getattr(prov, "source", None) or type(backend).__name__)


def require(backend: object, capability: Capability, *, needed_by: str) -> None:
    """Refuse, in one line, a backend that lacks ``capability``.

    e.g. "suite 'sleight' needs step decoding (in-process engine); backend openai:... offers
    chat generation only; use a local model or the black-box engine".
    """
    if isinstance(backend, capability.protocol):
        return
    have = capabilities(backend)
    offers = ", ".join(c.value for c in have) if have else "nothing tamperbench can use"
    only = " only" if len(have) == 1 else ""
    raise UserError(f"{needed_by} needs {capability.value}; backend {_describe(backend)} offers {offers}{only}; "
                    f"{capability.instead}")


def ensure_fits(prompt_len: int, max_new_tokens: int, max_context: int | None, what: str) -> None:
    """Refuse, before any compute, a prompt whose length plus the tokens to generate exceeds the
    model's context: past it, positions the model was never trained on give silent garbage (or
    minutes of work on a 130 KB prompt before an index error)."""
    if max_context is None or max_context <= 0:
        return
    if prompt_len + max_new_tokens > max_context:
        raise UserError(f"{what}: prompt is {prompt_len} tokens + {max_new_tokens} new tokens = "
                        f"{prompt_len + max_new_tokens}, past the model's context length of {max_context} tokens")
