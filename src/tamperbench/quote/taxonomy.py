"""Our fine quote classes mapped onto the Exact Words paper's five: ``--taxonomy paper``.

WHY: the scorer keeps more classes than the paper (``trailing_punct``, ``no_answer``,
``faithful_normalized``) and near-miss sub-labels, which say more about a failure; but then the
paper's five-class counts ("26 truncated, 13 wrong-span, 12 rewritten, 0 corrected") cannot be
reproduced by adding columns. This is the one written-down mapping, used by ``quote table`` and
``quote score`` under ``--taxonomy paper`` (and documented as a table in ``quote/data/README.md``).

The paper's classes (the Exact Words write-up, https://www.kaggle.com/benchmarks/saharshtibrewala/exact-words):
*faithful* (exact, or equal under a normalisation that forgives only curly quotes, unicode dashes and
whitespace), *corrected* (the planted error fixed),
*truncated* (a partial quote), *wrong_span* (real text, wrong boundaries), *rewritten* (text that
exists nowhere in the document).

**The fix decides first.** "Corrected" is "the planted error got fixed": an answer whose text is
nowhere in the document (our ``rewritten`` or ``trailing_punct``) that holds the corrected form and
not the planted span is ``corrected``, whatever else changed (a fix plus a U+2011 hyphen, a fix
inside a partial quote). Our own scorer checks a changed character first and says
``rewritten/changed_character``; the paper view reads the verdict's evidence
(``corrected_form_present``, ``planted_span_present``) before its sub-label.

**An invented terminal period** (a clause cut short, a period where the source goes on:
``rewritten/truncated_punct_added``) follows the seed's definitions literally under ``paper``:
*rewritten*, since "a single invisible character ... makes the quote no longer exist in the source"
and the seed lists "truncating clauses and inventing terminal periods" as two failures. The other
reading (the clause is a partial quote first) is ``--taxonomy paper-period-truncated``.

=========================  =======================================  ===============  ============================
our class                  our sub-label                            paper class      why
=========================  =======================================  ===============  ============================
faithful                   (none)                                   faithful         byte-identical
faithful_normalized        what was forgiven                        faithful         the paper's normalised match
corrected                  the planted kind                         corrected        same definition
rewritten, trailing_punct  any, with the planted error fixed        corrected        the fix decides first
trailing_punct             trailing_punct_dropped                   truncated        gold minus its final period
                                                                                     is a proper part of gold
trailing_punct             trailing_punct_added / _changed          rewritten        that text is nowhere in the
                                                                                     document
truncated                  prefix / suffix / middle / stops_at_..   truncated        same definition
wrong_span                 colon_split                              truncated        the text after a colon is a
                                                                                     proper part of the gold
wrong_span                 any other                                wrong_span       same definition
rewritten                  contains_correction                      corrected        the planted error fixed inside
                                                                                     an otherwise partial quote
rewritten                  truncated_punct_added                    rewritten        an invented period: text that
                                                                    (truncated under exists nowhere in the document
                                                                    paper-period-    (R1's cases)
                                                                    truncated)
rewritten                  any other                                rewritten        same definition
no_answer                  any                                      rewritten        the paper has no such class;
                                                                                     no text of the document came
=========================  =======================================  ===============  ============================
"""

from __future__ import annotations


PAPER_CLASSES = ("faithful", "corrected", "truncated", "wrong_span", "rewritten")
PAPER_TAXONOMIES: tuple[str, ...] = ("paper", "paper-period-truncated")
TAXONOMIES: tuple[str, ...] = ("ours", *PAPER_TAXONOMIES)
_NOT_DOCUMENT_TEXT = ("rewritten", "trailing_punct")  # our classes whose answer exists nowhere in the document

_BY_CLASS = {
    "faithful": "faithful",
    "faithful_normalized": "faithful",
    "corrected": "corrected",
    "truncated": "truncated",
    "wrong_span": "wrong_span",
    "rewritten": "rewritten",
    "no_answer": "rewritten",
}
_BY_SUB_LABEL = {
    ("trailing_punct", "trailing_punct_dropped"): "truncated",
    ("trailing_punct", "trailing_punct_added"): "rewritten",
    ("trailing_punct", "trailing_punct_changed"): "rewritten",
    ("wrong_span", "colon_split"): "truncated",
    # the paper's "corrected" is "the planted error got fixed", whatever the quote's boundaries
    ("rewritten", "contains_correction"): "corrected",
}
_INVENTED_PERIOD = ("rewritten", "truncated_punct_added")


def is_paper(taxonomy: str) -> bool:
    """Whether ``taxonomy`` is one of the paper's readings (five classes)."""
    return taxonomy in PAPER_TAXONOMIES


def fixed_planted_error(evidence: dict | None) -> bool:
    """The verdict's evidence says the planted error got fixed: corrected form present, planted span gone."""
    ev = evidence or {}
    return bool(ev.get("corrected_form_present")) and ev.get("planted_span_present") is False


def paper_class(category: str, sub_label: str | None, evidence: dict | None = None, taxonomy: str = "paper") -> str:
    """The paper's class for one of our verdicts (class, sub-label and its evidence); an unknown class is an error.

    ``taxonomy``: ``paper`` (an invented terminal period is rewritten, as the seed defines it) or
    ``paper-period-truncated`` (it is a truncation). Without ``evidence`` the fix is seen only through the
    ``contains_correction`` sub-label.
    """
    if taxonomy not in PAPER_TAXONOMIES:
        raise ValueError(f"paper_class: taxonomy must be one of {PAPER_TAXONOMIES}, not {taxonomy!r}")
    if category in _NOT_DOCUMENT_TEXT and fixed_planted_error(evidence):
        return "corrected"  # the fix decides first
    if (category, sub_label) == _INVENTED_PERIOD:
        return "truncated" if taxonomy == "paper-period-truncated" else "rewritten"
    hit = _BY_SUB_LABEL.get((category, sub_label or ""))
    if hit is not None:
        return hit
    if category == "trailing_punct":
        return "rewritten"  # a trailing-punctuation verdict without a known sub-label: not document text
    try:
        return _BY_CLASS[category]
    except KeyError:
        raise ValueError(f"no paper class for quote class {category!r}") from None


def check_taxonomy(value: str) -> str:
    """``--taxonomy`` value, or a one-line error naming the option."""
    from tamperbench.errors import UserError

    if value not in TAXONOMIES:
        raise UserError(f"--taxonomy: '{value}' is not one of {', '.join(TAXONOMIES)}")
    return value


def paper_notes(taxonomy: str) -> list[str]:
    """What a reader of a paper-view table must know about the mapping (printed under the tables)."""
    if not is_paper(taxonomy):
        return []
    period = ("truncated (--taxonomy paper-period-truncated: the clause is a partial quote first)"
              if taxonomy == "paper-period-truncated" else
              "rewritten (the seed: a single invented character makes the quote \"no longer exist in the source\"; "
              "--taxonomy paper-period-truncated counts it truncated)")
    return [f"Paper taxonomy ({taxonomy}): faithful = exact or the normalised match (curly quotes, unicode dashes, "
            "whitespace); a quote that fixes the planted error is corrected whatever else changed (the fix decides "
            "first); no_answer (nothing left after stripping reasoning, or an empty reply) counts as rewritten, the "
            f"paper having no such class; a clause cut short with an invented terminal period counts as {period}."]
