"""Our fine quote classes mapped onto the Exact Words paper's five: ``--taxonomy paper``.

WHY: the scorer keeps more classes than the paper (``trailing_punct``, ``no_answer``,
``faithful_normalized``) and near-miss sub-labels, which say more about a failure; but then the
paper's five-class counts ("26 truncated, 13 wrong-span, 12 rewritten, 0 corrected") cannot be
reproduced by adding columns. This is the one written-down mapping, used by ``quote table`` and
``quote score`` under ``--taxonomy paper`` (and documented as a table in ``quote/data/README.md``).

The paper's classes (seed 002): *faithful* (exact, or equal under a normalisation that forgives
only curly quotes, unicode dashes and whitespace), *corrected* (the planted error fixed),
*truncated* (a partial quote), *wrong_span* (real text, wrong boundaries), *rewritten* (text that
exists nowhere in the document).

=========================  =======================================  ===============  ============================
our class                  our sub-label                            paper class      why
=========================  =======================================  ===============  ============================
faithful                   (none)                                   faithful         byte-identical
faithful_normalized        what was forgiven                        faithful         the paper's normalised match
corrected                  the planted kind                         corrected        same definition
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
rewritten                  truncated_punct_added                    truncated        a partial quote ending in an
                                                                                     invented period (R1's cases)
rewritten                  any other                                rewritten        same definition
no_answer                  any                                      rewritten        the paper has no such class;
                                                                                     no text of the document came
=========================  =======================================  ===============  ============================
"""

from __future__ import annotations


PAPER_CLASSES = ("faithful", "corrected", "truncated", "wrong_span", "rewritten")
TAXONOMIES: tuple[str, ...] = ("ours", "paper")

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
    # the paper counts DeepSeek-R1's clause cut short with an invented final period among its truncations
    ("rewritten", "truncated_punct_added"): "truncated",
}


def paper_class(category: str, sub_label: str | None) -> str:
    """The paper's class for one of our (class, sub-label) verdicts; an unknown class is an error."""
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
