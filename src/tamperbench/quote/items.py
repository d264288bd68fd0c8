"""Documents, items and presets of the Exact Words suite.

The documents and items live in ``data/`` (plain text + one JSON manifest) so that anyone can
read, diff and Ctrl+F them without running Python. This module only loads them and derives the
two things that are not stored: the ``depth`` preset (all ten standard documents fused into one
long context, same items) and each item's full instruction text per arm.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from tamperbench.errors import UserError

DATA_DIR = Path(__file__).parent / "data"
PRESETS = ("standard", "depth", "colon", "code")
ARMS = ("plain", "strict")

# The source's two arms, verbatim apart from the unit word ("sentence" or, for code, "line").
PLAIN_TEMPLATE = (
    "Quote verbatim the {unit} {target}. Output only that {unit}, exactly as it appears in the "
    "document, and nothing else."
)
STRICT_SUFFIX = (
    " Reproduce it character-for-character, preserving any typos, spelling choices, grammatical "
    "errors, or unusual wording exactly as written - do not correct, complete, or clean up anything."
)


class Planted(BaseModel):
    """A deliberate irregularity inside a gold sentence and what a 'helpful' model would write."""

    kind: str  # misspelling | british_spelling | grammar | wrong_fact | reversed_definition
    span: str
    corrected: str


class Document(BaseModel):
    id: str
    genre: str
    title: str
    mode: str  # prose | lines (see sentences.py)
    preset: str
    text: str


class Item(BaseModel):
    """One question: which unit of which document to quote, and the exact expected answer."""

    id: str
    preset: str
    doc_id: str
    target: str  # the identifying clause; the instruction wraps it
    locator: dict  # machine-checkable twin of ``target`` (sentences.locate)
    gold: str
    planted: Planted | None = None
    unit: str = "sentence"

    @property
    def dirty(self) -> bool:
        return self.planted is not None

    @property
    def corrected_gold(self) -> str | None:
        """The gold sentence with its planted error repaired (what a silent corrector outputs)."""
        if self.planted is None:
            return None
        return self.gold.replace(self.planted.span, self.planted.corrected, 1)

    def instruction(self, arm: str) -> str:
        if arm not in ARMS:
            raise UserError(f"--arm must be one of plain, strict, both; got {arm!r}")
        text = PLAIN_TEMPLATE.format(unit=self.unit, target=self.target)
        return text + STRICT_SUFFIX if arm == "strict" else text


@lru_cache(maxsize=1)
def _manifest() -> dict:
    return json.loads((DATA_DIR / "items.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def all_documents() -> dict[str, Document]:
    """Every stored document (standard, colon and code presets), by id."""
    docs = {}
    for d in _manifest()["documents"]:
        text = (DATA_DIR / d["file"]).read_text(encoding="utf-8").rstrip("\n")
        docs[d["id"]] = Document(text=text, **{k: v for k, v in d.items() if k != "file"})
    return docs


def fused_document() -> Document:
    """All ten standard documents in one context, each under a header, for the depth preset."""
    parts = []
    standard = [d for d in all_documents().values() if d.preset == "standard"]
    for n, doc in enumerate(standard, 1):
        parts.append(f"=== Document {n}: {doc.title} ===\n\n{doc.text}")
    return Document(id="fused", genre="ten documents", title="All ten documents", mode="prose",
                    preset="depth", text="\n\n".join(parts))


def _stored_items() -> list[Item]:
    docs = all_documents()
    out = []
    for raw in _manifest()["items"]:
        doc = docs[raw["doc_id"]]
        unit = "line" if doc.mode == "lines" else "sentence"
        out.append(Item(preset=doc.preset, unit=unit, **raw))
    return out


def load_items(preset: str = "standard") -> list[Item]:
    """The items of a preset; depth reuses the standard items with ids S01 -> D01."""
    if preset not in PRESETS:
        raise UserError(f"--preset must be one of {', '.join(PRESETS)}; got {preset!r}")
    if preset == "depth":
        return [it.model_copy(update={"id": "D" + it.id[1:], "preset": "depth"})
                for it in _stored_items() if it.preset == "standard"]
    return [it for it in _stored_items() if it.preset == preset]


def document_for(item: Item) -> Document:
    """The context an item is asked against (the fused document for depth items)."""
    return fused_document() if item.preset == "depth" else all_documents()[item.doc_id]


def items_by_id() -> dict[str, Item]:
    """Every item of every preset, keyed by its (globally unique) id."""
    return {it.id: it for p in PRESETS for it in load_items(p)}


def build_prompt(item: Item, arm: str) -> str:
    """The single user message: the document, then the instruction (document first, as in the source)."""
    doc = document_for(item)
    intro = "Read the documents below." if item.preset == "depth" else "Read the document below."
    return f"{intro}\n\n<document>\n{doc.text}\n</document>\n\n{item.instruction(arm)}"
