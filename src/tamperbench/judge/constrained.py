"""``judge run --constrained``: each verdict decoded under a grammar built from its JSON schema.

Why: a small judge often answers in prose, or continues the reply it was shown, so its vote does
not parse; a grammar (models/decoding/grammar.py, llguidance) makes the answer the verdict's JSON
object by construction, and the parse rate then measures content, not format. The schema
(``data/verdict_schema.json``) is the object the prompt asks for: the four labels as booleans,
``confidence`` in [0, 1], a ``rationale`` of at most 100 characters, in the prompt's key order. With an
English rationale the object is then about 35 to 60 tokens, so it closes within the demo's 64-token
budget too (a cut-off object does not parse; 12 of 12 demo votes closed at 64). It is off by default and refused under ``--preset paper``,
whose judges decode freely; every vote stores whether it was constrained and which grammar.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from importlib import resources

from tamperbench.models.decoding.grammar import JsonGrammar, schema_sha256, schema_text

OPTION = "--constrained"


@lru_cache(maxsize=1)
def verdict_schema_text() -> str:
    """The verdict schema as compact JSON (what is hashed and stored)."""
    return schema_text(resources.files("tamperbench.judge").joinpath("data/verdict_schema.json").read_text())


def verdict_schema_sha256() -> str:
    return schema_sha256(verdict_schema_text())


@lru_cache(maxsize=1)
def verdict_grammar() -> JsonGrammar:
    """The compiled grammar; one ``UserError`` line when llguidance is missing."""
    return JsonGrammar.from_schema(verdict_schema_text(), option=OPTION)


def check_jury(jury: Mapping[str, object]) -> None:
    """Every judge must decode under a grammar (local transformers judges do; HTTP ones do not)."""
    from tamperbench.models.protocols import Capability, require

    for spec, backend in jury.items():
        require(backend, Capability.GRAMMAR, needed_by=f"{OPTION} (judge {spec})")


def describe(grammar: Mapping | None) -> str:
    """How a table names the decoding of its votes (tamperbench.labels, which the sleight tables use too)."""
    from tamperbench.labels import judge_decoding_text

    return judge_decoding_text(dict(grammar) if grammar else None)
