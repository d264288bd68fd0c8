"""``--layout paper``: Tables 1-3 with exactly the paper's columns and rounding.

WHY a separate layout: to compare a run with the published tables cell by cell. The rounding is the
one of the reference's table script (``scripts/update_paper_tables.py`` of fractalego/Sleight-of-Word):
a rate is Python's ``round(100 * count / n, digits)`` (round half to even), the Delta columns are
plain means over trials with two decimals, Table 2's gaps are differences of the *rounded*
percentages, the pooled row sums counts over models before dividing, and Table 1 is sorted by the
flagged rate. Intervals, coverage and our extra columns live in the default layout only.
"""

from __future__ import annotations


def pct(a: int, b: int, nd: int = 0) -> int | float | None:
    """The paper's percentage (None when there is nothing to divide, printed empty)."""
    if not b:
        return None
    v = round(100 * a / b, nd)
    return int(v) if nd == 0 else v


def _s(v) -> str:
    return "" if v is None else str(v)


def _gap(a: float | None, b: float | None) -> str:
    return "" if a is None or b is None else f"{a - b:+d}"


def _mean(total: float, n: int) -> str:
    return f"{total / n:+.2f}" if n else ""


def order(summ: list[dict]) -> list[dict]:
    """Models sorted by flagged rate (two decimals), highest first, as the paper sorts Table 1."""
    def key(m: dict) -> float:
        c = m["paper_counts"]
        v = pct(c["flag"], c["jn"], 2)
        return -(v if v is not None else -1.0)
    return sorted(summ, key=key)


def table1(summ: list[dict]) -> tuple[list[str], list[list[str]]]:
    head = ["Model", "Flag.", "Flag. (M.E.)", "Ign.", "Derail.", "Corr.", "Switch aware", "Δ surp. (nats)",
            "Δ ent. (nats)"]
    rows = []
    for m in order(summ):
        c = m["paper_counts"]
        rows.append([m["model"], _s(pct(c["flag"], c["jn"])), _s(pct(c["e_flag"], c["en"])), _s(pct(c["ign"], c["jn"])),
                     _s(pct(c["der"], c["jn"])), _s(pct(c["corr"], c["jn"])), _s(pct(c["aware"], c["jn"], 1)),
                     _mean(c["ds"], c["dsn"]), _mean(c["de"], c["den"])])
    return head, rows


def _t2_row(name: str, ef: int, en: int, sf: int, sn: int, ed: int, sd: int) -> tuple[list[str], dict]:
    pef, psf, ped, psd = pct(ef, en), pct(sf, sn), pct(ed, en), pct(sd, sn)
    return [name, _s(pef), _s(psf), _gap(pef, psf), _s(ped), _s(psd), _gap(ped, psd)], {
        "flagged_entity": pef, "flagged_words": psf, "derailed_entity": ped, "derailed_words": psd}


def table2(summ: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Per model, then the pooled row: counts summed over all models, gaps of the rounded rates."""
    head = ["Model", "Flagged Ent. (%)", "Flagged Subst. (%)", "Δ", "Derailed Ent. (%)", "Derailed Subst. (%)", "Δ"]
    rows = []
    for m in order(summ):
        c = m["paper_counts"]
        rows.append(_t2_row(m["model"], c["e_flag"], c["en"], c["s_flag"], c["sn"], c["e_der"], c["s_der"])[0])
    rows.append(pooled_row(summ)[0])
    return head, rows


def pooled_row(summ: list[dict]) -> tuple[list[str], dict]:
    """Table 2's "Pooled (all models)" row and its numbers."""
    tot = {k: sum(m["paper_counts"][k] for m in summ) for k in ("e_flag", "en", "s_flag", "sn", "e_der", "s_der")}
    return _t2_row("Pooled (all models)", tot["e_flag"], tot["en"], tot["s_flag"], tot["sn"], tot["e_der"], tot["s_der"])


def table3(summ: list[dict]) -> tuple[list[str], list[list[str]]]:
    head = ["Model", "Untouched (%)"]
    return head, [[m["model"], _s(pct(m["paper_counts"]["unt"], m["paper_counts"]["n"], 1))] for m in order(summ)]


TITLES = {
    "table1": "Table 1 (paper layout): judge labels (%) and Δ surprisal / Δ top-20 entropy (mean over touched trials)",
    "table2": "Table 2 (paper layout): entity vs substituted words; Δ = gap of the rounded rates in points",
    "table3": "Table 3 (paper layout): untouched trials",
}


def counts(summ: list[dict]) -> dict[str, list[dict]]:
    """The numerator and denominator behind every cell of the paper layout, row by row in the printed order
    (``tables.json``: the printed cells stay exactly the paper's, the counts live here)."""
    rows = order(summ)
    t1 = [{"model": m["model"], "flag": [c["flag"], c["jn"]], "flag_me": [c["e_flag"], c["en"]],
           "ign": [c["ign"], c["jn"]], "der": [c["der"], c["jn"]], "corr": [c["corr"], c["jn"]],
           "aware": [c["aware"], c["jn"]], "delta_surprisal": [round(c["ds"], 6), c["dsn"]],
           "delta_entropy": [round(c["de"], 6), c["den"]]} for m in rows for c in [m["paper_counts"]]]
    t2 = [{"model": m["model"], "flagged_entity": [c["e_flag"], c["en"]], "flagged_words": [c["s_flag"], c["sn"]],
           "derailed_entity": [c["e_der"], c["en"]], "derailed_words": [c["s_der"], c["sn"]]}
          for m in rows for c in [m["paper_counts"]]]
    tot = {k: sum(m["paper_counts"][k] for m in summ) for k in ("e_flag", "en", "s_flag", "sn", "e_der", "s_der")}
    t2.append({"model": "Pooled (all models)", "flagged_entity": [tot["e_flag"], tot["en"]],
               "flagged_words": [tot["s_flag"], tot["sn"]], "derailed_entity": [tot["e_der"], tot["en"]],
               "derailed_words": [tot["s_der"], tot["sn"]]})
    t3 = [{"model": m["model"], "untouched": [m["paper_counts"]["unt"], m["paper_counts"]["n"]]} for m in rows]
    return {"table1": t1, "table2": t2, "table3": t3}


def build(summ: list[dict]) -> dict[str, tuple[list[str], list[list[str]]]]:
    return {"table1": table1(summ), "table2": table2(summ), "table3": table3(summ)}
