"""Capability protocols, ``require``, ``ensure_fits`` and provenance ids (pure, no model)."""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.models.protocols import Capability, capabilities, ensure_fits, require
from tamperbench.models.provenance import ModelProvenance


class ChatOnly:
    """What an HTTP backend offers: chat and nothing in-process."""

    provenance = ModelProvenance(source="openai:http://x#m", kind="openai", resolved_path="http://x",
                                 sha256="-", tamperbench_version="0")
    max_context = 4096
    provenance_id = provenance.id

    def chat_ids(self, messages, *, system=None, template_kwargs=None):
        return [1]

    def chat_text(self, messages, *, system=None, template_kwargs=None):
        return "x"

    def generate_chat(self, conversations, **kw):
        return []

    def decode(self, ids, *, skip_special_tokens=True):
        return ""

    def encode(self, text):
        return []


def test_chat_only_backend_is_refused_for_step_decoding_in_one_line():
    be = ChatOnly()
    assert capabilities(be) == [Capability.CHAT]
    require(be, Capability.CHAT, needed_by="suite 'quote'")
    with pytest.raises(UserError) as err:
        require(be, Capability.STEP, needed_by="suite 'sleight'")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg == ("suite 'sleight' needs step decoding (in-process engine); backend openai:http://x#m offers "
                   "chat generation only; use a local model or the black-box engine")


def test_quote_decodes_by_memory_only_on_a_backend_with_the_capability():
    """Issue 28 item 5: ``rows_from_memory`` is a capability (``MemoryRowsBackend``), not a flag the
    quote runner reads: a backend without it keeps the load-time batch as the cap."""
    from contextlib import contextmanager

    from tamperbench.models.protocols import MemoryRowsBackend
    from tamperbench.quote.runner import MAX_CALL_BATCHES, call_size

    class PrefixOnly(ChatOnly):
        max_batch_size = 8

        @contextmanager
        def prefix_memory(self, fraction=0.1):
            yield None

    class Local(PrefixOnly):
        @contextmanager
        def rows_from_memory(self):
            yield

    assert not isinstance(PrefixOnly(), MemoryRowsBackend) and isinstance(Local(), MemoryRowsBackend)
    assert Capability.MEMORY_ROWS in capabilities(Local()) and Capability.MEMORY_ROWS not in capabilities(PrefixOnly())
    assert call_size(Local(), None) == (MAX_CALL_BATCHES * 8, True, True)
    assert call_size(Local(), 8) == (8, True, False)  # an explicit --batch-size stays the cap
    assert call_size(PrefixOnly(), None) == (8, True, False)
    with pytest.raises(UserError, match="needs rows sized by free memory; .* give --batch-size, or use a local model"):
        require(PrefixOnly(), Capability.MEMORY_ROWS, needed_by="this test")


def test_ensure_fits_names_item_and_both_lengths():
    ensure_fits(100, 28, 128, "question 1")  # exactly full is fine
    with pytest.raises(UserError, match=r"question 1: prompt is 101 tokens \+ 28 new tokens = 129, past the "
                                        r"model's context length of 128 tokens"):
        ensure_fits(101, 28, 128, "question 1")
    ensure_fits(10**6, 1, None, "no limit known")


def test_provenance_id_is_unchanged_for_torch_values_and_new_fields_default():
    # the id a provenance had before the torch fields became optional (sha256 of the canonical
    # JSON with every field, computed by hand here rather than by ModelProvenance.id)
    import hashlib
    import json

    kw = dict(source="embedded", kind="embedded", resolved_path="/x", sha256="ab", revision=None,
              quantization=None, architecture=None, dtype="float32", device="cpu", torch_version="2",
              transformers_version="5", tamperbench_version="0.1", python_version="3.11.9")
    canon = json.dumps(kw, sort_keys=True, separators=(",", ":"))
    assert ModelProvenance(**kw).id == hashlib.sha256(canon.encode()).hexdigest()[:16]
    assert ModelProvenance(**kw, chat_template="none").id != ModelProvenance(**kw).id
    remote = ModelProvenance(source="openai:x", kind="openai", resolved_path="x", sha256="-", tamperbench_version="0")
    assert remote.dtype is None and len(remote.id) == 16
