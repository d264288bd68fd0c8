"""``--chat-template``: the model's own chat template, none (a raw completion prompt) or a file.

Why: base models (a Gemma 3 270M GGUF, most pretrained checkpoints) ship no chat template, and
transformers then raises deep inside ``apply_chat_template``. A researcher comparing a base model
with its instruct sibling needs to say how prompts are built, and every record must say which
way was used, since the template changes every log-prob. This module imports no torch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tamperbench.errors import UserError

__all__ = ["ChatTemplate", "MISSING_TEMPLATE_HINT", "raw_prompt", "resolve_chat_template"]

MAX_TEMPLATE_BYTES = 1 << 20
MISSING_TEMPLATE_HINT = ("pass --chat-template none (the raw prompt as a completion prompt) or "
                         "--chat-template FILE (a Jinja chat template)")


@dataclass(frozen=True)
class ChatTemplate:
    """How prompts are built: ``mode`` is model | none | file; ``label`` goes into provenance."""

    mode: str
    text: str | None = None  # the Jinja source for mode == "file"
    label: str = "model"


def resolve_chat_template(option: str | None) -> ChatTemplate:
    """Parse the option value: None/"model" -> the tokenizer's own; "none"; else a file path."""
    if option is None or option == "model":
        return ChatTemplate("model")
    if option == "none":
        return ChatTemplate("none", label="none")
    path = Path(option).expanduser()
    if not path.is_file():
        raise UserError(f"--chat-template: '{option}' is not 'none', 'model' or an existing Jinja template file")
    if path.stat().st_size > MAX_TEMPLATE_BYTES:
        raise UserError(f"--chat-template: {path} is larger than {MAX_TEMPLATE_BYTES} bytes; not a chat template")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"--chat-template: {path} is not UTF-8 text") from None
    try:
        import jinja2

        jinja2.Environment().parse(text)
    except jinja2.TemplateSyntaxError as err:
        raise UserError(f"--chat-template: {path} line {err.lineno}: not a valid Jinja template ({err.message})") from None
    digest = hashlib.sha256(data).hexdigest()
    return ChatTemplate("file", text=text, label=f"file:{digest}:{path.resolve()}")


def raw_prompt(messages: Sequence[dict]) -> str:
    """``--chat-template none``: the messages' contents as one completion prompt.

    One message (the usual case: a question) is its content exactly; several (a system prompt,
    earlier turns) are joined by a blank line, with no role markers, since a base model has none.
    """
    return "\n\n".join(m["content"] for m in messages)
