"""Why a cell or pool has no equivalence bound is recorded beside the (empty) bound, the first reason that
applies, so a reader (``owmi score``'s Markdown, the results page) never has to guess which one it was."""

from __future__ import annotations

import math

import pytest

from tamperbench.owmi.score.score import no_bound_reason
from tamperbench.owmi.score.verdict import ITEM_FLOOR

READABLE = {"pairs": 40, "items": ITEM_FLOOR, "auroc_se": 0.03, "score_levels": 2}


def test_a_readable_cell_has_no_reason():
    assert no_bound_reason(READABLE) is None


@pytest.mark.parametrize("change, reason", [
    ({"pairs": 0, "items": 0, "auroc_se": None}, "no complete pairs"),
    ({"items": ITEM_FLOOR - 1}, f"{ITEM_FLOOR - 1} items, below the {ITEM_FLOOR}-item floor"),
    ({"score_levels": 1, "auroc_se": 0.0}, "a constant reporter (one score level over every pair)"),
    ({"auroc_se": 0.0}, "the bootstrap did not vary (AUROC standard error 0)"),
    ({"auroc_se": math.nan}, "the bootstrap did not vary (AUROC standard error 0)"),
    ({"auroc_se": None}, "the bootstrap did not vary (AUROC standard error 0)"),
    # several apply: the first in the order above is the one named
    ({"items": 3, "score_levels": 1, "auroc_se": 0.0}, f"3 items, below the {ITEM_FLOOR}-item floor"),
])
def test_each_reason_is_named(change, reason):
    assert no_bound_reason({**READABLE, **change}) == reason


def test_the_entry_stores_the_reason_beside_an_empty_bound():
    """Through ``detection_entry`` on rows: 12 items with a varying reporter get a bound and no reason; the
    first 6 of them get no bound, and the reason says it is the item floor."""
    from tamperbench.owmi.score.score import detection_entry

    def rows(n_items: int) -> list[dict]:
        out = []
        for i in range(n_items):
            for cond, det, g in (("intervention", i % 3 != 0, 0.2 + 0.05 * i), ("sham", i % 4 == 0, 0.1 + 0.03 * i)):
                out.append({"pair_id": f"p{i}", "item_id": f"item{i}", "condition": cond, "parse_ok": True,
                            "detected": det, "graded": g, "track": "A", "observer_tier": None})
        return out

    many = detection_entry(rows(12), 200, 0)["complete"]
    assert many["no_bound_reason"] is None and many["equivalence"]
    few = detection_entry(rows(6), 200, 0)["complete"]
    assert few["equivalence"] == [] and few["no_bound_reason"] == f"6 items, below the {ITEM_FLOOR}-item floor"
