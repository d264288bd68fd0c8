"""Safe delimiting of untrusted reply text inside the judge prompt.

WHY: the reply being judged is model output we do not control. It may contain the paper's own
``>>>`` marker, a fake JSON verdict, "ignore previous instructions", or literal chat-template
control strings such as ``<|im_end|>`` that a tokenizer would turn back into real special tokens and
so close the user turn early. Two defences live here:

* :func:`fence_nonce` picks a fence word the reply cannot contain. It is derived from a hash of the
  reply (so prompts are reproducible run to run, unlike a random nonce) and re-derived with a
  counter in the astronomically unlikely case the fence text occurs in the reply. The reply text
  itself is never altered by fencing.
* :func:`defuse_special_tokens` breaks up literal special-token strings of the judge's tokenizer
  (``<|im_end|>`` -> ``<|\u200bim_end|>``) so they stay ordinary text. This is the only edit ever made
  to the reply, it is invisible when rendered, and the count is returned so it can be recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

ZERO_WIDTH_SPACE = "\u200b"


def fence_nonce(reply: str, *, salt: str = "") -> str:
    """A 16-hex-digit nonce such that neither ``REPLY-<nonce>`` nor the nonce occurs in ``reply``."""
    counter = 0
    while True:
        digest = hashlib.sha256(f"{salt}\x00{counter}\x00{reply}".encode("utf-8", "surrogatepass")).hexdigest()
        nonce = digest[:16]
        if nonce not in reply:
            return nonce
        counter += 1


def defuse_special_tokens(text: str, special_tokens: Iterable[str]) -> tuple[str, int]:
    """Insert a zero-width space after the first character of every special-token string in ``text``.

    Returns the new text and how many occurrences were defused. Single-character "special tokens"
    cannot be split and are skipped (no tokenizer we support has a one-character control token that
    a reply could meaningfully forge).
    """
    count = 0
    for tok in sorted({t for t in special_tokens if t and len(t) > 1}, key=len, reverse=True):
        if tok in text:
            count += text.count(tok)
            text = text.replace(tok, tok[0] + ZERO_WIDTH_SPACE + tok[1:])
    return text, count


def tokenizer_special_tokens(backend: object) -> list[str]:
    """Special-token strings of a backend's tokenizer, or [] for backends without one (HTTP APIs)."""
    tok = getattr(backend, "tokenizer", None)
    if tok is None:
        return []
    names: set[str] = set(getattr(tok, "all_special_tokens", []) or [])
    added = getattr(tok, "added_tokens_decoder", None) or {}
    for entry in added.values():
        if getattr(entry, "special", False):
            names.add(str(entry))
    return sorted(names)
