"""Scoring responses collected elsewhere: bad lines are reported by number, the rest are scored."""

import json

from tamperbench.quote.items import items_by_id
from tamperbench.quote.score_file import score_lines

ITEMS = items_by_id()


def test_bad_lines_are_reported_and_the_rest_scored():
    lines = [
        json.dumps({"item_id": "S02", "response": ITEMS["S02"].gold, "model": "m1"}),
        '{"item_id": "S03", "response": ',                     # malformed JSON
        json.dumps({"item_id": "Z99", "response": "x"}),       # unknown id
        json.dumps({"item_id": "S03", "response": "   "}),     # empty response
        "",                                                    # blank lines are ignored
        json.dumps(["not", "an", "object"]),
        json.dumps({"response": "no id"}),
        json.dumps({"item_id": "S04"}),
        json.dumps({"item_id": "K04", "response": ITEMS["K04"].corrected_gold}),
    ]
    verdicts, problems, skipped = score_lines(lines)
    assert [(v["line"], v["item_id"], v["category"]) for v in verdicts] == [
        (1, "S02", "faithful"), (4, "S03", "no_answer"), (9, "K04", "corrected")]
    assert verdicts[0]["model"] == "m1" and verdicts[0]["evidence"]["found"] == "exact"
    assert [n for n, _ in problems] == [2, 3, 4, 6, 7, 8]
    msgs = dict(problems)
    assert "malformed JSON" in msgs[2] and "unknown item id 'Z99'" in msgs[3] and "empty response" in msgs[4]
    assert skipped == 5
