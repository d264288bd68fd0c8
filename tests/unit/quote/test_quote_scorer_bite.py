"""The changed-character rule at its boundary (at most 3 same-length substitutions), on a real item.

Expected positions and code points are written from the gold text by hand (the positions of the
letters we replace), not read back from the scorer.
"""

from __future__ import annotations

import pytest

from tamperbench.quote.items import items_by_id
from tamperbench.quote.scorer import score_response

GOLD = items_by_id()["S02"].gold
# 'A second agent must confirm the amount, the order number and the payment method before ...'
POSITIONS = [GOLD.index("second") + 1, GOLD.index("agent") + 2, GOLD.index("confirm") + 3,
             GOLD.index("amount") + 4, GOLD.index("payment") + 5]


def substitute(text: str, positions: list[int], char: str = "\u0416") -> str:  # Cyrillic Zhe: in no document
    chars = list(text)
    for p in positions:
        chars[p] = char
    return "".join(chars)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_up_to_three_substitutions_are_a_changed_character(k):
    v = score_response(items_by_id()["S02"], substitute(GOLD, POSITIONS[:k]))
    assert (v.category, v.sub_label) == ("rewritten", "changed_character")
    assert v.evidence["changed_chars"] == [
        {"at": p, "expected": f"U+{ord(GOLD[p]):04X} {GOLD[p]!r}", "got": "U+0416 '\u0416'"} for p in POSITIONS[:k]]
    assert [GOLD[p] for p in POSITIONS[:3]] == ["e", "e", "f"]  # by hand: s[e]cond, ag[e]nt, con[f]irm


@pytest.mark.parametrize("k", [4, 5])
def test_four_or_more_substitutions_are_another_rewrite(k):
    v = score_response(items_by_id()["S02"], substitute(GOLD, POSITIONS[:k]))
    assert (v.category, v.sub_label) == ("rewritten", "other_rewrite")
    assert "changed_chars" not in v.evidence


def test_a_length_change_is_never_a_changed_character():
    one_more = GOLD[:10] + "\u0416" + GOLD[10:]
    v = score_response(items_by_id()["S02"], one_more)
    assert v.category == "rewritten" and v.sub_label != "changed_character" and "changed_chars" not in v.evidence
