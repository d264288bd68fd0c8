"""Cohen's and Fleiss' kappa against independent references: the closed form by hand (Cohen) and
statsmodels' ``fleiss_kappa`` (Fleiss), on hypothesis-drawn ratings, plus every refusal path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tamperbench.stats.agreement import cohen_kappa, fleiss_kappa, fleiss_kappa_from_ratings, percent_agreement


def cohen_by_hand(a, b):
    n = len(a)
    cats = set(a) | set(b)
    po = sum(x == y for x, y in zip(a, b)) / n
    pe = sum((a.count(c) / n) * (b.count(c) / n) for c in cats)
    return None if pe == 1 else (po - pe) / (1 - pe)


pairs = st.integers(1, 30).flatmap(lambda n: st.tuples(st.lists(st.sampled_from("xyz"), min_size=n, max_size=n),
                                                       st.lists(st.sampled_from("xyz"), min_size=n, max_size=n)))


@settings(max_examples=25, deadline=None)  # sklearn's per-call validation is slow
@given(ab=pairs)
def test_cohen_equals_the_closed_form(ab):
    a, b = ab
    want = cohen_by_hand(a, b)
    got = cohen_kappa(a, b)
    if want is None or len(set(a) | set(b)) == 1:
        assert got is None
    else:
        assert got == pytest.approx(want, abs=1e-12)
    assert percent_agreement(a, b) == pytest.approx(sum(x == y for x, y in zip(a, b)) / len(a))


def test_cohen_worked_example_and_refusals():
    # 2x2 by hand: a = TTTF F, b = TFTF F -> p_o = 4/5, p_e = (3/5)(2/5) + (2/5)(3/5) = 12/25
    a, b = [1, 1, 1, 0, 0], [1, 0, 1, 0, 0]
    assert cohen_kappa(a, b) == pytest.approx((4 / 5 - 12 / 25) / (1 - 12 / 25))
    assert cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)
    assert cohen_kappa(["a", "a"], ["a", "a"]) is None and cohen_kappa([], []) is None
    with pytest.raises(ValueError, match="differ in length"):
        cohen_kappa([1], [1, 0])
    with pytest.raises(ValueError):
        percent_agreement([1], [])
    assert percent_agreement([], []) is None


@st.composite
def rating_tables(draw):
    raters = draw(st.integers(2, 6))
    n_items = draw(st.integers(1, 12))
    n_cat = draw(st.integers(2, 4))
    rows = []
    for _ in range(n_items):
        cuts = sorted(draw(st.lists(st.integers(0, raters), min_size=n_cat - 1, max_size=n_cat - 1)))
        bounds = [0, *cuts, raters]
        rows.append([bounds[i + 1] - bounds[i] for i in range(n_cat)])
    return rows


@settings(max_examples=60, deadline=None)
@given(table=rating_tables())
def test_fleiss_equals_statsmodels(table):
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    arr = np.array(table, dtype=float)
    p_j = arr.sum(axis=0) / arr.sum()
    got = fleiss_kappa(table)
    if np.isclose(np.square(p_j).sum(), 1.0):
        assert got is None
    else:
        assert got == pytest.approx(float(sm_fleiss(arr, method="fleiss")), abs=1e-9)


@settings(max_examples=50, deadline=None)
@given(ratings=st.integers(2, 5).flatmap(lambda r: st.lists(st.lists(st.booleans(), min_size=r, max_size=r),
                                                             min_size=1, max_size=10)))
def test_fleiss_from_ratings_equals_statsmodels_aggregate(ratings):
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    table, _ = aggregate_raters(np.array(ratings, dtype=int), n_cat=2)
    got = fleiss_kappa_from_ratings(ratings)
    if len({r for row in ratings for r in row}) == 1:
        assert got is None
    else:
        assert got == pytest.approx(float(sm_fleiss(table, method="fleiss")), abs=1e-9)


def test_fleiss_refusals():
    assert fleiss_kappa_from_ratings([]) is None
    assert fleiss_kappa(np.zeros((0, 3))) is None
    with pytest.raises(ValueError, match=r"^fleiss_kappa: counts must be a 2-D items x categories table$"):
        fleiss_kappa([1, 2, 3])
    with pytest.raises(ValueError, match=r"^fleiss_kappa: counts must be non-negative$"):
        fleiss_kappa([[3, -1], [1, 1]])
    with pytest.raises(ValueError, match=r"^fleiss_kappa: every item needs the same number of ratings$"):
        fleiss_kappa([[2, 0], [1, 2]])
    with pytest.raises(ValueError, match=r"^fleiss_kappa: needs at least two ratings per item$"):
        fleiss_kappa([[1, 0], [0, 1]])
    # categories of mixed types (unorderable among themselves) still count
    assert fleiss_kappa_from_ratings([["a", 1], [1, 1], ["a", "a"]]) == pytest.approx(
        fleiss_kappa([[1, 1], [0, 2], [2, 0]]))
    # one category for everything: p_e = 1, undefined; one item with split votes is fine
    assert fleiss_kappa([[0, 4], [0, 4]]) is None
    assert fleiss_kappa([[2, 2]]) == pytest.approx((1 / 3 - 1 / 2) / (1 / 2))


def test_cohen_on_labels_one_rater_never_used_and_on_mixed_types_by_hand():
    # a = x x y y, b = x z y y: p_o = 3/4, p_e = (1/2)(1/4) + (1/2)(1/2) + 0 = 3/8 -> kappa = 0.6
    assert cohen_kappa(["x", "x", "y", "y"], ["x", "z", "y", "y"]) == pytest.approx(0.6)
    # categories of mixed types (unorderable): p_o = 1/2, p_e = 1/2 -> kappa = 0
    assert cohen_kappa(["a", 1, "a", 1], [1, 1, "a", "a"]) == pytest.approx(0.0)
    with pytest.raises(ValueError, match=r"^percent_agreement: sequences differ in length$"):
        percent_agreement([1, 0], [1])
