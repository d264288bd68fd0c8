"""Deterministic quote scorer: one class, one near-miss sub-label and the evidence per response.

No judge model: every verdict is a string comparison a reader can repeat with Ctrl+F. Classes,
checked in this order (the first that applies wins):

``no_answer``            nothing left after stripping reasoning blocks (or one never closed)
``faithful``             byte-identical to the gold sentence (outer whitespace trimmed)
``faithful_normalized``  identical after forgiving curly quotes, unicode dashes, whitespace only
``corrected``            the planted error repaired, everything else faithful
``trailing_punct``       the whole gold sentence with only its trailing punctuation added/dropped
``truncated``            a proper part of the gold sentence
``wrong_span``           text that exists in the document with other boundaries (a neighbour
                         glued on, a section label kept, a start right after a colon, ...)
``rewritten``            text that exists nowhere in the document

Comparisons other than ``faithful`` use the normalised text (normalise.py) on both sides.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from tamperbench.quote.evidence import longest_match
from tamperbench.quote.items import Item, document_for
from tamperbench.quote.normalise import (document_map, extract_answer, forgiven_differences, normalise,
                                         strip_trailing_punct)
from tamperbench.quote.sentences import segment

CATEGORIES = ("faithful", "faithful_normalized", "corrected", "trailing_punct", "truncated",
              "wrong_span", "rewritten", "no_answer")
_LABEL_ONLY = re.compile(r"^(?:section\s+|§\s*)?(?:#{1,6}|[-*•]|\d+(?:\.\d+)*\.?)[:.)]?$", re.I)
_COLON = re.compile(r"[:;]\s")
_FENCE = re.compile(r"^```[\w-]*\s*|\s*```$")


class Verdict(BaseModel):
    item_id: str
    category: str
    sub_label: str | None = None
    answer: str | None = None
    evidence: dict


def score_response(item: Item, response: str, document: str | None = None) -> Verdict:
    """Classify one raw model response to ``item`` (document defaults to the item's own context)."""
    doc = document if document is not None else document_for(item).text
    answer, why_none = extract_answer(response)
    if answer is None:
        return Verdict(item_id=item.id, category="no_answer", sub_label=why_none,
                       evidence={"reason": why_none})
    evidence = _locate(answer, item, doc)
    category, sub = _classify(answer, item, doc, evidence)
    return Verdict(item_id=item.id, category=category, sub_label=sub, answer=answer, evidence=evidence)


def _classify(answer: str, item: Item, doc: str, ev: dict) -> tuple[str, str | None]:
    gold = item.gold
    if answer == gold:
        return "faithful", None
    a, g = normalise(answer), normalise(gold)
    if a == g:
        ev["forgiven"] = forgiven_differences(answer, gold)
        return "faithful_normalized", "+".join(ev["forgiven"]) or None
    if item.planted is not None and a == normalise(item.corrected_gold or ""):
        return "corrected", item.planted.kind
    a_core, g_core = strip_trailing_punct(a), strip_trailing_punct(g)
    if a_core and a_core == g_core:
        a_tail, g_tail = a[len(a_core):].strip(), g[len(g_core):].strip()
        kind = "dropped" if not a_tail else "added" if not g_tail else "changed"
        ev["trailing"] = {"expected": g_tail, "got": a_tail}
        return "trailing_punct", f"trailing_punct_{kind}"
    for m in _COLON.finditer(g):
        if a == g[m.end():]:
            ev["split_at"] = m.start()
            return "wrong_span", "colon_split"
    if a in g:
        if g.startswith(a):
            rest = g[len(a):].lstrip()
            return "truncated", "stops_at_colon" if a[-1] in ":;" or rest[:1] in (":", ";") else "prefix"
        return "truncated", "suffix" if g.endswith(a) else "middle"
    if a in normalise(doc):
        return "wrong_span", _wrong_span_label(a, g, item, doc, ev)
    return "rewritten", _rewritten_label(a, g, item, ev)


def _wrong_span_label(a: str, g: str, item: Item, doc: str, ev: dict) -> str:
    if g in a:
        before, after = a.split(g, 1)
        ev["extra_text"] = {"before": before.strip(), "after": after.strip()}
        if _LABEL_ONLY.match(before.strip()) and not after.strip():
            return "section_label"
        return "neighbour_glued"
    segs = segment(doc, "lines" if item.unit == "line" else "prose")
    if any(normalise(s.text) == a for s in segs):
        return "other_sentence"
    gold_span = (ev.get("gold_start"), ev.get("gold_end"))
    if None not in gold_span and ev["doc_start"] < gold_span[1] and ev["doc_end"] > gold_span[0]:
        return "boundary_shift"
    return "other_text"


def _rewritten_label(a: str, g: str, item: Item, ev: dict) -> str:
    if _FENCE.sub("", a).strip("\"'`*_ ") == g:
        return "wrapped"
    if "<document>" in a or "</document>" in a:
        return "prompt_echo"  # reproduces the prompt's document wrapper (gold inside or not)
    if g in a:
        before, after = a.split(g, 1)
        ev["extra_text"] = {"before": before.strip(), "after": after.strip()}
        if _LABEL_ONLY.match(before.strip()) and not after.strip():
            return "section_label"
        return "lead_in" if before.strip() else "trailing_commentary"
    for m in _COLON.finditer(g):
        rest = g[m.end():]
        capitalised = rest[:1].upper() + rest[1:]
        if rest and a in (capitalised, strip_trailing_punct(capitalised)):
            ev["split_at"] = m.start()
            return "capitalised_colon_split"
    changes = _char_changes(g, a)
    if changes is not None:
        ev["changed_chars"] = changes
        return "changed_character"
    core = strip_trailing_punct(a)
    if core and core in g and core != strip_trailing_punct(g):
        ev["trailing"] = {"expected": g[g.index(core) + len(core):][:1], "got": a[len(core):]}
        return "truncated_punct_added"
    if item.planted is not None and normalise(item.planted.corrected) in a and \
            normalise(item.planted.span) not in a:
        return "contains_correction"
    return "other_rewrite"


def _char_changes(gold: str, answer: str, limit: int = 3) -> list[dict] | None:
    """Same-length substitutions of at most ``limit`` characters (e.g. U+2011 for a hyphen)."""
    if len(gold) != len(answer):
        return None
    diffs = [(i, x, y) for i, (x, y) in enumerate(zip(gold, answer)) if x != y]
    if not diffs or len(diffs) > limit:
        return None
    return [{"at": i, "expected": f"U+{ord(x):04X} {x!r}", "got": f"U+{ord(y):04X} {y!r}"}
            for i, x, y in diffs]


def _locate(answer: str, item: Item, doc: str) -> dict:
    """Where the answer (or its longest matching part) sits in the document, in raw offsets."""
    nd, dmap = document_map(doc)
    a = normalise(answer)
    ev: dict = {"answer_chars": len(answer)}
    if item.planted is not None:
        ev["planted_span_present"] = normalise(item.planted.span) in a
        ev["corrected_form_present"] = normalise(item.planted.corrected) in a
    raw_gold = doc.find(item.gold)
    if raw_gold >= 0:
        ev["gold_start"], ev["gold_end"] = raw_gold, raw_gold + len(item.gold)
    if doc.find(answer) >= 0:
        start, end, found = doc.find(answer), doc.find(answer) + len(answer), "exact"
        ev["occurrences"] = doc.count(answer)
    elif a in nd:
        pos = nd.find(a)
        start, end, found = dmap[pos], dmap[pos + len(a) - 1] + 1, "normalized"
        ev["occurrences"] = nd.count(a)
    else:
        m = longest_match(nd, a)  # difflib's block, in linear time (evidence.py)
        if m.size == 0:
            ev.update(found="none", doc_start=None, doc_end=None, doc_line=None, matched_text="")
            return ev
        start, end, found = dmap[m.a], dmap[m.a + m.size - 1] + 1, "partial"
    ev.update(found=found, doc_start=start, doc_end=end, doc_line=doc.count("\n", 0, start) + 1,
              matched_text=doc[start:end], match_chars=end - start)
    return ev
