"""``--layout paper`` edge cells, by hand: a gap with one side empty, the sort key's two decimals
against whole percentages, and Table 3's one decimal on a rate that is not a round number."""

from tamperbench.sleight import paper_layout


def _model(name, **counts):
    base = {k: 0 for k in ("n", "unt", "jn", "flag", "corr", "der", "aware", "ign", "en", "e_flag", "e_der",
                           "sn", "s_flag", "s_der", "dsn", "den")} | {"ds": 0.0, "de": 0.0}
    return {"model": name, "paper_counts": base | counts}


def test_a_gap_with_one_side_empty_is_empty():
    # no entity trials (en = 0) but 4 substituted-word trials: 2/4 = 50 flagged, 1/4 = 25 derailed
    m = _model("w", en=0, sn=4, s_flag=2, s_der=1)
    head, rows = paper_layout.table2([m])
    assert rows[0] == ["w", "", "50", "", "", "25", ""]
    assert paper_layout.pooled_row([m])[1] == {"flagged_entity": None, "flagged_words": 50,
                                               "derailed_entity": None, "derailed_words": 25}
    e = _model("e", en=3, e_flag=1, sn=0)
    assert paper_layout.table2([e])[1][0] == ["e", "33", "", "", "0", "", ""]


def test_order_compares_two_decimals_not_whole_percentages():
    third = _model("third", jn=3, flag=1)   # 33.33
    flat = _model("flat", jn=100, flag=33)  # 33.00; both 33 as whole percentages
    assert [m["model"] for m in paper_layout.order([flat, third])] == ["third", "flat"]
    assert [m["model"] for m in paper_layout.order([third, flat])] == ["third", "flat"]


def test_table3_rounds_to_one_decimal():
    assert paper_layout.table3([_model("a", n=3, unt=1), _model("b", n=8, unt=1)])[1] == [["a", "33.3"], ["b", "12.5"]]
    assert paper_layout.pct(2, 3, 1) == 66.7 and paper_layout.pct(1, 3, 2) == 33.33
