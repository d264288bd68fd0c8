"""Reference answerers through the scorer: the items answered by answerers whose class is known.

WHY: a table in which a small model quotes nothing faithfully (0 of 222 at temperature 1 on both installable
models) says something only if the same items and the same scorer can say "faithful" at all. Each
reference answerer is built from the item itself, never from a model, and has one expected class:

``copier``     the gold sentence, byte for byte                                -> faithful
``corrector``  the gold with its planted error repaired (dirty items only)     -> corrected
``truncator``  the gold's first half, cut at a word boundary, no end mark       -> truncated
``neighbour``  the gold and the next sentence, as the document runs on           -> wrong span

They run through :func:`tamperbench.quote.scorer.score_response` exactly as a model's answer does, under
our taxonomy and the paper's. A control that does not land in its class is a scorer defect, and the
results page prints the miss rather than hide it.
"""

from __future__ import annotations

from collections import Counter

from tamperbench.quote.items import Item, document_for, load_items
from tamperbench.quote.scorer import score_response
from tamperbench.quote.sentences import segment
from tamperbench.quote.taxonomy import paper_class

__all__ = ["EXPECTED", "reference_answers", "score_controls"]

# control -> (our class, the paper's class) it must land in
EXPECTED = {"copier": ("faithful", "faithful"), "corrector": ("corrected", "corrected"),
            "truncator": ("truncated", "truncated"), "neighbour": ("wrong_span", "wrong_span")}


def _with_next_sentence(item: Item) -> str | None:
    """The document's own text from the gold sentence through the end of the next one (a heading's label
    and the line breaks included, as they stand in the document)."""
    doc = document_for(item)
    units = segment(doc.text, doc.mode)
    at = [i for i, u in enumerate(units) if u.text == item.gold]
    if not at or at[0] + 1 >= len(units):
        return None
    return doc.text[units[at[0]].start:units[at[0] + 1].end]


def reference_answers(item: Item) -> dict[str, str]:
    """Each reference answerer's answer to ``item`` (an answerer with nothing to say on it is left out: the
    corrector on a clean item, the neighbour on a document's last sentence, the truncator on a gold of one
    word)."""
    out = {"copier": item.gold}
    if item.corrected_gold is not None:
        out["corrector"] = item.corrected_gold
    words = item.gold.split(" ")
    if len(words) > 1:
        out["truncator"] = " ".join(words[: len(words) // 2]).rstrip(".,;:!?")
    glued = _with_next_sentence(item)
    if glued is not None:
        out["neighbour"] = glued
    return out


def score_controls(preset: str = "standard", taxonomy: str = "paper") -> dict[str, dict]:
    """Per reference answerer: items answered, answers in its expected class (ours and the paper's), and the
    class counts under each."""
    rows: dict[str, dict] = {}
    for item in load_items(preset):
        for name, answer in reference_answers(item).items():
            v = score_response(item, answer)
            ours, paper = EXPECTED[name]
            r = rows.setdefault(name, {"n": 0, "expected": ours, "expected_paper": paper, "hits": 0, "hits_paper": 0,
                                       "ours": Counter(), "paper": Counter()})
            got_paper = paper_class(v.category, v.sub_label, v.evidence, taxonomy)
            r["n"] += 1
            r["hits"] += v.category == ours
            r["hits_paper"] += got_paper == paper
            r["ours"][v.category] += 1
            r["paper"][got_paper] += 1
    return {name: {**r, "ours": dict(r["ours"]), "paper": dict(r["paper"])} for name, r in rows.items()}
