"""Grammar-constrained decoding: a JSON schema per row, a token bitmask per step (llguidance).

Why a library: a JSON grammar over a BPE vocabulary (a token may close a string and open the next
key at once) is exactly what llguidance computes, in Rust, in about 2 ms per row and step here.
This module only adapts it to our rows: one ``LLMatcher`` per row, built from a schema compiled
once (:class:`JsonGrammar`); per step, the rows' bitmasks unpacked to a boolean (rows, vocab)
mask the decoders apply to their logits; after the step each row's matcher consumes the token
chosen. Once a row's grammar is complete (``RowGrammar.done``) its mask allows only EOS, so the
row ends there.

The API the callers use (OWMI's ``--readout constrained``, ``judge run --constrained``):

* ``g = JsonGrammar.from_schema(schema, option="--readout")``: checks the library is installed
  and that llguidance compiles the schema; both failures are one ``UserError`` line naming
  ``option``, before any compute. ``g.provenance()`` is the dict to store with each record
  (schema text, its sha256, the JSON options, the library version).
* ``row = matcher(hf_tokenizer, g, eos_ids)``: a fresh row state (the llguidance tokenizer is
  built once per HF tokenizer and cached); ``row_grammars(hf_tokenizer, {rid: g or None},
  eos_ids)`` makes them for a batch of rows. A row state is consumed as its row decodes: make a
  fresh one for every generation.
* ``StepDecoder.set_grammar(rid, row)`` (models/decoding/decoder.py), ``Rows.greedy(...,
  grammars={rid: row})`` (owmi/ragged.py) and ``forward.greedy(..., grammar=row)`` (owmi's one-row
  path) decode under it; ``HFBackend.generate_chat(..., grammar=g)`` (one ``JsonGrammar`` or a
  list, one per conversation) builds the row states itself. For OWMI's probes, e.g.
  ``rows.greedy(logits, max_new, eos, "probe", grammars=row_grammars(b.tokenizer, {rid: g for rid
  in rows.rids}, b.eos_ids))``.

The JSON options (``JSON_OPTIONS``) are part of the grammar and recorded with it: no free
whitespace (a small model under a flexible grammar can emit newlines until its budget runs out,
and the text is then not JSON), ``", "`` and ``": "`` separators, the form prompts show.

``llguidance.torch.apply_token_bitmask_inplace`` is not used: its kernel is wrapped in
``torch.compile``, whose first call took 60 s on this CPU. :func:`allowed` fills the rows' bitmask
with llguidance's parallel executor and unpacks it with numpy's ``unpackbits``: 0.6 ms for 32 rows
of a 49,152-token vocabulary here, where a torch shift-and-mask took 15 ms (65 ms on a loaded
machine), more than the masks themselves (about 1.3 ms for 32 rows in parallel, 6 ms one by one).
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from tamperbench.errors import UserError

__all__ = ["INSTALL_HINT", "JSON_OPTIONS", "JsonGrammar", "RowGrammar", "allowed", "choose_under_grammar",
           "constrain", "library_version", "matcher", "require_llguidance", "row_grammars", "schema_sha256",
           "schema_text"]

PIN = "1.9.1"
INSTALL_HINT = f"pip install 'tamperbench[constrained]' (or pip install llguidance=={PIN})"
JSON_OPTIONS: dict[str, Any] = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def require_llguidance(option: str = "--constrained"):
    """The llguidance module, or one ``UserError`` line naming ``option`` and the install command."""
    try:
        import llguidance
        import llguidance.hf  # noqa: F401  (needs transformers; imported here so a failure is this line)
    except ImportError:
        raise UserError(f"{option}: grammar-constrained decoding needs the llguidance library, which is not "
                        f"installed; install it with: {INSTALL_HINT}") from None
    return llguidance


def library_version() -> str:
    return f"llguidance {require_llguidance().__version__}"


def schema_text(schema: Mapping | str, *, option: str = "--constrained") -> str:
    """The schema as compact JSON, keys in the given order (what is hashed and recorded); needs no
    llguidance, so a run's config id can name its grammar before the library is checked."""
    try:
        obj = json.loads(schema) if isinstance(schema, str) else dict(schema)
    except ValueError as err:
        raise UserError(f"{option}: the JSON schema is not JSON ({err})") from None
    if not isinstance(obj, dict):
        raise UserError(f"{option}: the JSON schema must be a JSON object, not {type(obj).__name__}")
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def schema_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class JsonGrammar:
    """A JSON schema compiled to an llguidance grammar, with what provenance needs to name it."""

    schema_text: str  # the schema as compact JSON, keys in the given order (llguidance emits that order)
    sha256: str  # of schema_text
    grammar: str  # llguidance's grammar (the schema plus JSON_OPTIONS)
    library: str  # "llguidance 1.9.1"

    @classmethod
    def from_schema(cls, schema: Mapping | str, *, option: str = "--constrained") -> JsonGrammar:
        llg = require_llguidance(option)
        text = schema_text(schema, option=option)
        try:
            grammar = llg.LLMatcher.grammar_from_json_schema(text, overrides=JSON_OPTIONS)  # type: ignore[arg-type]
        except ValueError as err:
            raise UserError(f"{option}: the JSON schema cannot be compiled to a grammar ({err})") from None
        problem = llg.LLMatcher.validate_grammar(grammar)
        if problem and not problem.startswith("WARNING"):
            raise UserError(f"{option}: the JSON schema cannot be compiled to a grammar ({problem.strip()})")
        return cls(text, schema_sha256(text), grammar, f"llguidance {llg.__version__}")

    def provenance(self) -> dict[str, str]:
        """What a record stores to say which grammar constrained it."""
        return {"grammar": "json_schema", "grammar_sha256": self.sha256, "grammar_schema": self.schema_text,
                "grammar_options": json.dumps(JSON_OPTIONS, sort_keys=True), "grammar_library": self.library}


# llguidance tokenizer per HF tokenizer (building one reads the whole vocabulary: ~2 s here)
_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _llg_tokenizer(hf_tokenizer, eos_ids: tuple[int, ...]):
    llg = require_llguidance()
    per = _TOKENIZERS.setdefault(hf_tokenizer, {})
    if eos_ids not in per:
        try:
            per[eos_ids] = llg.hf.from_tokenizer(hf_tokenizer, eos_token=list(eos_ids) or None)
        except ValueError as err:  # a slow (Python) tokenizer: llguidance reads fast ones only
            raise UserError(f"grammar-constrained decoding needs a fast tokenizer ({err})") from None
    return per[eos_ids]


class RowGrammar:
    """One row's grammar state (an ``LLMatcher``): fill its mask, consume tokens, copy, roll back."""

    def __init__(self, grammar: JsonGrammar, matcher_, vocab_size: int, eos_ids: Sequence[int]):
        self.grammar, self.m, self.vocab_size = grammar, matcher_, vocab_size
        self.eos_ids = tuple(int(e) for e in eos_ids)

    def consume(self, token: int) -> bool:
        """Advance by the token chosen; False (and ``error`` set) when the grammar rejects it."""
        return bool(self.m.consume_token(int(token)))

    @property
    def done(self) -> bool:
        """The grammar is complete (or failed): only EOS may follow."""
        return bool(self.m.is_stopped())

    @property
    def accepting(self) -> bool:
        """The text so far is a complete match (EOS allowed now)."""
        return bool(self.m.is_accepting())

    @property
    def error(self) -> str | None:
        return self.m.get_error() or None if self.m.is_error() else None

    def allows(self, token: int) -> bool:
        """Whether the grammar takes ``token`` next (EOS: once the text is a complete match)."""
        if int(token) in self.eos_ids:
            return self.accepting
        return self.m.validate_tokens([int(token)]) == 1

    def copy(self) -> RowGrammar:
        return RowGrammar(self.grammar, self.m.deep_copy(), self.vocab_size, self.eos_ids)

    def rollback(self, n_tokens: int) -> None:
        self.m.rollback(int(n_tokens))


def matcher(hf_tokenizer, grammar: JsonGrammar, eos_ids: Sequence[int] = ()) -> RowGrammar:
    """A fresh row state for ``grammar``; ``eos_ids``: the ids that end the row (default: the
    tokenizer's EOS)."""
    llg = require_llguidance()
    tok = _llg_tokenizer(hf_tokenizer, tuple(int(e) for e in eos_ids))
    m = llg.LLMatcher(tok, grammar.grammar, log_level=0)
    if m.is_error():
        raise UserError(f"the JSON schema {grammar.sha256[:12]} cannot be used with this tokenizer ({m.get_error()})")
    return RowGrammar(grammar, m, tok.vocab_size, tok.eos_tokens)


def row_grammars(hf_tokenizer, grammars: Mapping[Any, JsonGrammar | None], eos_ids: Sequence[int] = ()
                 ) -> dict[Any, RowGrammar]:
    """Fresh row states for ``Rows.greedy(grammars=...)`` (owmi/ragged.py): row id -> RowGrammar
    for every row mapped to a grammar; rows mapped to None are left out (they decode freely)."""
    return {rid: matcher(hf_tokenizer, g, eos_ids) for rid, g in grammars.items() if g is not None}


_EXECUTOR: list = []  # one llguidance.LLExecutor (a thread pool), made on first use


def _executor():
    if not _EXECUTOR:
        _EXECUTOR.append(require_llguidance().LLExecutor())
    return _EXECUTOR[0]


def allowed(rows: Sequence[RowGrammar | None], vocab: int, device=None) -> torch.Tensor:
    """(len(rows), vocab) bool: the tokens each row may take next; all True for a row without a
    grammar. ``vocab`` is the model's logit width: ids past the tokenizer's vocabulary (a model
    padded to a multiple of 64, say) are never allowed under a grammar; ids past ``vocab`` that the
    tokenizer has are dropped. A grammar row left with no allowed id (a failed matcher) gets its
    EOS ids, so it ends instead of decoding garbage."""
    import numpy as np
    from llguidance.torch import allocate_token_bitmask, fill_next_token_bitmask_par

    idx = [i for i, r in enumerate(rows) if r is not None]
    if not idx:
        out = torch.ones(len(rows), vocab, dtype=torch.bool)
        return out.to(device) if device is not None else out
    width = max(rows[i].vocab_size for i in idx)  # type: ignore[union-attr]
    bitmask = allocate_token_bitmask(len(idx), width)
    fill_next_token_bitmask_par(_executor(), [(rows[i].m, k) for k, i in enumerate(idx)], bitmask)  # type: ignore[union-attr]
    # bit j of 32-bit word w is token 32 w + j: little-endian words, bits least significant first
    words = bitmask.numpy().astype("<i4", copy=False).view(np.uint8)
    bits = torch.from_numpy(np.unpackbits(words, axis=1, bitorder="little").view(np.bool_))
    n = min(vocab, width)
    sub = bits[:, :n] if n == vocab else torch.cat([bits[:, :n], bits.new_zeros(len(idx), vocab - n)], 1)
    for k in (~sub.any(1)).nonzero()[:, 0].tolist():
        sub[k, [e for e in rows[idx[k]].eos_ids if e < vocab]] = True  # type: ignore[union-attr]
    if len(idx) == len(rows):
        out = sub
    else:
        out = torch.ones(len(rows), vocab, dtype=torch.bool)
        out[torch.tensor(idx)] = sub
    return out.to(device) if device is not None else out


def constrain(logits: torch.Tensor, rows: Sequence[RowGrammar | None]) -> torch.Tensor:
    """``logits`` (rows, V) with every token a row's grammar forbids at -inf (a new tensor; rows
    without a grammar unchanged). Returns ``logits`` itself when no row has a grammar."""
    if all(r is None for r in rows):
        return logits
    mask = allowed(rows, logits.shape[-1], logits.device)
    return logits.masked_fill(~mask, float("-inf"))


def grammar_rows(grammars: Mapping[Any, RowGrammar] | None, rids: Sequence) -> list[RowGrammar | None]:
    """Per row id of ``rids``, its grammar or None."""
    return [grammars.get(r) if grammars else None for r in rids]


def choose_under_grammar(slots: Sequence, logp: torch.Tensor, chosen: torch.Tensor, skip: set[int]) -> None:
    """The step decoder's choice, in place: each slot whose row has a grammar (and is not in
    ``skip``: forced or re-fed) takes the arg-max of its pending log-probs over the tokens its
    grammar allows (EOS only, once the grammar is complete)."""
    idx = [s for s, r in enumerate(slots) if r is not None and r.grammar is not None and s not in skip]
    if idx:
        mask = allowed([slots[s].grammar for s in idx], logp.shape[1], logp.device)
        chosen[idx] = logp[idx].masked_fill(~mask, float("-inf")).argmax(-1)
