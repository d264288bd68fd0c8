"""``--taxonomy paper``: our classes onto the paper's five, on real scorer verdicts; pooled faithful rates."""

import json

import pytest
from statsmodels.stats.proportion import proportion_confint
from typer.testing import CliRunner

from tamperbench.errors import UserError
from tamperbench.quote.items import items_by_id
from tamperbench.quote.scorer import CATEGORIES, score_response
from tamperbench.quote.tables import summarise
from tamperbench.quote.taxonomy import PAPER_CLASSES, check_taxonomy, paper_class

GOLD = items_by_id()["S01"].gold  # "But a part of it is our own doing: customers who ... double-refunded."
AFTER_COLON = GOLD[GOLD.index(": ") + 2:]


@pytest.mark.parametrize("response, ours, paper", [
    (GOLD, ("faithful", None), "faithful"),
    (GOLD.replace("'", "\u2019") if "'" in GOLD else "  " + GOLD.replace(" ", "  ", 1), None, "faithful"),
    (GOLD[:-1], ("trailing_punct", "trailing_punct_dropped"), "truncated"),       # dropped final period
    (GOLD[:-1] + "!", ("trailing_punct", "trailing_punct_changed"), "rewritten"),  # changed trailing punctuation
    (AFTER_COLON, ("wrong_span", "colon_split"), "truncated"),                     # colon split
    (AFTER_COLON[0].upper() + AFTER_COLON[1:], ("rewritten", "capitalised_colon_split"), "rewritten"),
    (GOLD[:30], ("truncated", "prefix"), "truncated"),
    ("Sure: " + GOLD, ("rewritten", "lead_in"), "rewritten"),
    ("", ("no_answer", "empty"), "rewritten"),
])
def test_scorer_verdicts_map_to_the_paper_classes(response, ours, paper):
    v = score_response(items_by_id()["S01"], response)
    if ours is not None:
        assert (v.category, v.sub_label) == ours
    assert paper_class(v.category, v.sub_label) == paper


def test_added_trailing_punctuation_is_rewritten():
    line = items_by_id()["K01"]  # a code line: its gold ends in a letter
    v = score_response(line, line.gold + ".")
    assert (v.category, v.sub_label) == ("trailing_punct", "trailing_punct_added")
    assert paper_class(v.category, v.sub_label) == "rewritten"


def test_every_class_of_ours_has_a_paper_class():
    assert {paper_class(c, None) for c in CATEGORIES} <= set(PAPER_CLASSES)
    assert paper_class("faithful_normalized", "quotes") == "faithful"
    assert paper_class("corrected", "misspelling") == "corrected"
    assert paper_class("wrong_span", "neighbour_glued") == "wrong_span"
    assert paper_class("wrong_span", "section_label") == "wrong_span"
    with pytest.raises(ValueError):
        paper_class("mystery", None)
    with pytest.raises(UserError, match="--taxonomy"):
        check_taxonomy("fine")


def _row(model, arm, cat, sub=None):
    return {"model_label": model, "preset": "standard", "arm": arm, "item_id": "S01", "category": cat,
            "sub_label": sub, "dirty": False, "repeat": 0, "gold": "g", "evidence": {}}


ROWS = ([_row("a", "plain", "faithful")] * 3 + [_row("a", "plain", "faithful_normalized", "quotes")]
        + [_row("a", "strict", "trailing_punct", "trailing_punct_dropped")] * 2 + [_row("a", "strict", "faithful")] * 2
        + [_row("b", "plain", "wrong_span", "colon_split"), _row("b", "plain", "faithful")]
        + [_row("b", "strict", "no_answer", "empty"), _row("b", "strict", "corrected", "misspelling")])


def test_paper_taxonomy_counts_by_hand():
    s = summarise(ROWS, taxonomy="paper")
    assert s["classes"] == list(PAPER_CLASSES)
    assert s["taxonomy"]["plain"] == {"faithful": 5, "corrected": 0, "truncated": 1, "wrong_span": 0, "rewritten": 0}
    assert s["taxonomy"]["strict"] == {"faithful": 2, "corrected": 1, "truncated": 2, "wrong_span": 0, "rewritten": 1}
    ours = summarise(ROWS)
    assert ours["taxonomy"]["plain"]["faithful_normalized"] == 1 and ours["taxonomy"]["plain"]["wrong_span"] == 1


def test_faithful_rate_per_arm_pooled_and_per_model_over_both_arms():
    paper = summarise(ROWS, taxonomy="paper")
    arms = {r["arm"]: (r["n"], r["faithful"]) for r in paper["pooled_by_arm"]}
    assert arms == {"plain": (6, 5), "strict": (6, 2)}  # paper faithful counts the normalised match
    models = {r["model_label"]: (r["n"], r["faithful"]) for r in paper["per_model"]}
    assert models == {"a": (8, 6), "b": (4, 1)}
    ours = summarise(ROWS)
    assert {r["arm"]: r["faithful"] for r in ours["pooled_by_arm"]} == {"plain": 4, "strict": 2}
    (a,) = [r for r in paper["per_model"] if r["model_label"] == "a"]
    lo, hi = proportion_confint(6, 8, alpha=0.05, method="wilson")
    assert a["faithful_rate"] == 0.75 and a["ci95"] == [pytest.approx(lo, abs=2e-4), pytest.approx(hi, abs=2e-4)]


def test_quote_score_writes_the_paper_class_beside_ours(tmp_path):
    from tamperbench.cli import app

    responses = tmp_path / "r.jsonl"
    responses.write_text("\n".join(json.dumps({"item_id": "S01", "response": r})
                                   for r in (GOLD, GOLD[:-1], AFTER_COLON, GOLD[:-1] + "!")) + "\n")
    out = tmp_path / "v.jsonl"
    res = CliRunner().invoke(app, ["quote", "score", str(responses), "--taxonomy", "paper", "--out", str(out)])
    assert res.exit_code == 0, res.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(v["paper_class"], v["category"], v["sub_label"]) for v in got] == [
        ("faithful", "faithful", None), ("truncated", "trailing_punct", "trailing_punct_dropped"),
        ("truncated", "wrong_span", "colon_split"), ("rewritten", "trailing_punct", "trailing_punct_changed")]
    bad = CliRunner().invoke(app, ["quote", "score", str(responses), "--taxonomy", "fine"])
    assert bad.exit_code != 0 and "--taxonomy" in str(bad.exception or bad.output)


def test_messages_and_sub_label_none():
    assert paper_class("trailing_punct", None) == "rewritten"
    assert paper_class("wrong_span", None) == "wrong_span"
    with pytest.raises(ValueError, match="^no paper class for quote class 'mystery'$"):
        paper_class("mystery", None)
    with pytest.raises(UserError, match="^--taxonomy: 'fine' is not one of ours, paper, paper-period-truncated$"):
        check_taxonomy("fine")
    assert check_taxonomy("paper") == "paper"
