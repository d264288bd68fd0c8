"""The paper layout and the counts behind it, on hand-made trials (no model, no store)."""

import pytest

from tamperbench.sleight import paper_layout
from tamperbench.sleight.summary import _judge_block, _rate, paper_counts


def trial(entity=False, untouched=False, flagged=None, corrected=None, derailed=None, aware=None, ds=None, de=None):
    return {"entity": entity, "untouched": untouched, "flagged": flagged, "corrected": corrected,
            "derailed": derailed, "aware": aware,
            "_sig": {"delta_surprisal": ds, "delta_entropy_top20": de}}


def test_paper_counts_by_hand():
    trials = [
        trial(entity=True, flagged=True, corrected=True, derailed=False, aware=False, ds=1.0, de=2.0),
        trial(flagged=False, corrected=False, derailed=False, aware=False, ds=0.5, de=None),  # ignored
        trial(flagged=None, corrected=True, derailed=None, aware=None, ds=-0.5, de=1.0),  # partial: None = not assigned
        trial(untouched=True),
        trial(flagged=None, corrected=None, derailed=None, aware=None, ds=0.25),  # not judged
    ]
    c = paper_counts(trials, judged=True)
    assert (c["n"], c["unt"], c["jn"]) == (5, 1, 3)
    assert (c["flag"], c["corr"], c["der"], c["aware"], c["ign"]) == (1, 2, 0, 0, 1)
    assert (c["en"], c["e_flag"], c["sn"], c["s_flag"], c["s_der"]) == (1, 1, 2, 0, 0)
    assert (c["ds"], c["dsn"], c["de"], c["den"]) == (pytest.approx(1.25), 4, pytest.approx(3.0), 2)
    assert paper_counts(trials, judged=False)["jn"] == 0


def test_pct_rounds_half_to_even_like_python_round():
    assert paper_layout.pct(1, 8) == 12  # 12.5 -> 12
    assert paper_layout.pct(3, 8) == 38  # 37.5 -> 38
    assert paper_layout.pct(1, 3, 1) == 33.3
    assert paper_layout.pct(1, 0) is None


def _model(name, **counts):
    base = {k: 0 for k in ("n", "unt", "jn", "flag", "corr", "der", "aware", "ign", "en", "e_flag", "e_der",
                           "sn", "s_flag", "s_der", "dsn", "den")} | {"ds": 0.0, "de": 0.0}
    return {"model": name, "paper_counts": base | counts}


SUMM = [
    _model("a", n=10, unt=1, jn=9, flag=1, corr=3, der=5, aware=1, ign=2, en=1, e_flag=1, e_der=1, sn=8, s_flag=0,
           s_der=4, ds=1.0, dsn=4, de=2.0, den=4),
    _model("b", n=10, unt=2, jn=8, flag=4, corr=2, der=2, aware=0, ign=1, en=2, e_flag=1, e_der=2, sn=6, s_flag=3,
           s_der=0, ds=-0.3, dsn=3, de=0.0, den=3),
]


def test_table1_paper_columns_rounding_and_order():
    head, rows = paper_layout.table1(SUMM)
    assert head == ["Model", "Flag.", "Flag. (M.E.)", "Ign.", "Derail.", "Corr.", "Switch aware",
                    "Δ surp. (nats)", "Δ ent. (nats)"]
    # b flags 4/8 = 50% > a 1/9 = 11.1%: b first
    assert rows[0] == ["b", "50", "50", "12", "25", "25", "0.0", "-0.10", "+0.00"]
    assert rows[1] == ["a", "11", "100", "22", "56", "33", "11.1", "+0.25", "+0.50"]


def test_table2_gaps_of_rounded_rates_and_pooled_row():
    head, rows = paper_layout.table2(SUMM)
    assert head[0] == "Model" and len(head) == 7
    # b: flagged ent 1/2 = 50, subst 3/6 = 50 -> +0; derailed 2/2 = 100, 0/6 = 0 -> +100
    assert rows[0] == ["b", "50", "50", "+0", "100", "0", "+100"]
    # a: 1/1 = 100, 0/8 = 0 -> +100; derailed 100, 4/8 = 50 -> +50
    assert rows[1] == ["a", "100", "0", "+100", "100", "50", "+50"]
    # pooled: counts summed before dividing: ent flag 2/3 = 67, subst 3/14 = 21 -> +46;
    # derailed 3/3 = 100, 4/14 = 29 -> +71 (the mean of the two models' rates would give 75 and 50)
    assert rows[2] == ["Pooled (all models)", "67", "21", "+46", "100", "29", "+71"]


def test_table3_untouched_one_decimal():
    assert paper_layout.table3(SUMM)[1] == [["b", "20.0"], ["a", "10.0"]]


def test_default_layout_rates_and_ignored_agree_with_the_schema_rule():
    trials = [trial(flagged=True, corrected=None, derailed=None, aware=None),
              trial(flagged=False, corrected=False, derailed=False, aware=False),
              trial(flagged=None, corrected=None, derailed=None, aware=None),
              trial(untouched=True)]
    block = _judge_block(trials, judged=True)
    # ignored: False for the first (a label is True), True for the second, None for the third
    assert block["ignored"] == 50.0 and block["n_judged"] == 2
    assert block["flagged"] == 50.0 and block["corrected"] == 0.0
    assert _rate([None, None]) is None


def test_paper_heads_and_empty_cells():
    empty = [_model("e", n=4, unt=4)]  # every trial untouched: nothing judged, no Delta
    assert paper_layout.table1(empty)[1] == [["e", "", "", "", "", "", "", "", ""]]
    head2, rows2 = paper_layout.table2(empty)
    assert head2 == ["Model", "Flagged Ent. (%)", "Flagged Subst. (%)", "Δ", "Derailed Ent. (%)",
                     "Derailed Subst. (%)", "Δ"]
    assert rows2 == [["e", "", "", "", "", "", ""], ["Pooled (all models)", "", "", "", "", "", ""]]
    assert paper_layout.table3(empty) == (["Model", "Untouched (%)"], [["e", "100.0"]])
    assert paper_layout.table3([_model("z")])[1] == [["z", ""]]
    assert set(paper_layout.build(empty)) == {"table1", "table2", "table3"}


def test_order_uses_two_decimals_and_puts_unjudged_models_last():
    a = _model("a", jn=3, flag=1)  # 33.33 at two decimals (33.333 at three)
    b = _model("b", jn=10000, flag=3333)  # 33.33
    none = _model("none")
    # a tie at two decimals keeps the input order; a model with nothing judged sorts last
    assert [m["model"] for m in paper_layout.order([none, b, a])] == ["b", "a", "none"]
    assert [m["model"] for m in paper_layout.order([a, none, b])] == ["a", "b", "none"]
    low = _model("low", jn=100, flag=0)
    assert [m["model"] for m in paper_layout.order([none, low])] == ["low", "none"]
