"""Every row of the written-down mapping (taxonomy.py's docstring table, which quote/data/README.md
repeats) checked one by one, and the ``--taxonomy`` error line exactly. Expected values are the
table's, written out by hand, so a changed key, value or fallback turns a test red."""

import pytest

from tamperbench.errors import UserError
from tamperbench.quote.taxonomy import PAPER_CLASSES, TAXONOMIES, check_taxonomy, paper_class


@pytest.mark.parametrize("category, sub_label, paper", [
    ("faithful", None, "faithful"),
    ("faithful_normalized", "quotes+dashes", "faithful"),
    ("faithful_normalized", None, "faithful"),
    ("corrected", "misspelling", "corrected"),
    ("trailing_punct", "trailing_punct_dropped", "truncated"),
    ("trailing_punct", "trailing_punct_added", "rewritten"),
    ("trailing_punct", "trailing_punct_changed", "rewritten"),
    ("trailing_punct", None, "rewritten"),          # no known sub-label: not document text
    ("trailing_punct", "something_new", "rewritten"),
    ("truncated", "prefix", "truncated"),
    ("truncated", "stops_at_colon", "truncated"),
    ("truncated", None, "truncated"),
    ("wrong_span", "colon_split", "truncated"),
    ("wrong_span", "neighbour_glued", "wrong_span"),
    ("wrong_span", None, "wrong_span"),
    ("rewritten", "lead_in", "rewritten"),
    ("rewritten", None, "rewritten"),
    ("no_answer", "empty", "rewritten"),
    ("no_answer", None, "rewritten"),
])
def test_each_row_of_the_mapping(category, sub_label, paper):
    assert paper_class(category, sub_label) == paper


def test_sub_labels_only_count_with_their_own_class():
    # "colon_split" moves wrong_span to truncated, but the same sub-label under another class does not
    assert paper_class("rewritten", "colon_split") == "rewritten"
    assert paper_class("truncated", "trailing_punct_added") == "truncated"
    assert paper_class("faithful", "trailing_punct_changed") == "faithful"


def test_the_paper_classes_and_taxonomy_names():
    assert PAPER_CLASSES == ("faithful", "corrected", "truncated", "wrong_span", "rewritten")
    assert TAXONOMIES == ("ours", "paper", "paper-period-truncated")
    assert check_taxonomy("ours") == "ours" and check_taxonomy("paper-period-truncated") == "paper-period-truncated"
    assert check_taxonomy("paper") == "paper"


def test_unknown_values_are_refused_with_one_exact_line():
    with pytest.raises(UserError) as e:
        check_taxonomy("Paper")
    assert str(e.value) == "--taxonomy: 'Paper' is not one of ours, paper, paper-period-truncated"
    with pytest.raises(ValueError) as v:
        paper_class("mystery", "x")
    assert str(v.value) == "no paper class for quote class 'mystery'"
    with pytest.raises(ValueError):
        paper_class("", None)
    with pytest.raises(ValueError, match="taxonomy must be one of"):
        paper_class("faithful", None, taxonomy="ours")
