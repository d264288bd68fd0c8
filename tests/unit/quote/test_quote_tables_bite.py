"""The quote tables cell by cell: every printed table parsed back into its title, header and rows and
compared with values worked out by hand; the saved JSON's exact form; records read back from a real
DuckDB run with their provenance label. Wilson intervals from statsmodels
(``proportion_confint(k, n, method="wilson")``): (2, 4) -> 15.0%-85.0%, (0, 2) -> 0.0%-65.8%,
(2, 6) -> 9.7%-70.0%.
"""

import fcntl
import io
import json
import os

from pydantic import BaseModel
from rich.console import Console

from tamperbench.quote.runner import TABLE
from tamperbench.quote.tables import load_rows, render, summarise, to_markdown, write_tables
from tamperbench.store import RunStore
from tamperbench.store.run_store import Record

LONG_GOLD = "0123456789" * 8  # 80 characters: the printed table shows the first 70


def _row(item, arm, cat, sub=None, repeat=0, dirty=False, planted=None, model="m"):
    return {"model_label": model, "preset": "standard", "arm": arm, "item_id": item, "category": cat,
            "sub_label": sub, "dirty": dirty, "repeat": repeat, "gold": LONG_GOLD if item == "S01" else "g " + item,
            "evidence": {"planted_span_present": planted} if dirty else {}}


ROWS = [
    _row("S01", "plain", "faithful"),
    _row("S01", "plain", "truncated", "prefix", repeat=1),
    _row("S02", "plain", "faithful_normalized", "quotes"),
    _row("S03", "plain", "faithful"),
    _row("S01", "strict", "rewritten", "lead_in", dirty=True, planted=True),
    _row("S02", "strict", "corrected", None, dirty=True, planted=False),
]

OURS = ["faithful", "faithful_normalized", "corrected", "trailing_punct", "truncated", "wrong_span", "rewritten",
        "no_answer"]

# (title, header, rows) of every printed table, by hand from ROWS:
# plain: 4 responses, 2 byte-identical (S01 r0, S03), +1 normalised; repeat 0 has 2 of 3 faithful, repeat 1 0 of 1
# -> spread 66.7% over 2 repeats, sd |2/3 - 0| / sqrt(2) = 47.1%; of plain's 3 items S01 changes class
# (faithful, then truncated/prefix). strict: 2 responses, none faithful, both dirty, 1 corrected.
EXPECTED = [
    ("Exact Words: faithful (byte-identical) rate per model and arm",
     ["model", "preset", "arm", "n", "faithful", "rate", "95% CI", "+normalized", "corrected/dirty", "repeat spread"],
     [["m", "standard", "plain", "4", "2", "50.0%", "15.0%-85.0%", "3", "0/0",
       "66.7% over 2 (sd 47.1%; 1/3 items change class)"],
      ["m", "standard", "strict", "2", "0", "0.0%", "0.0%-65.8%", "0", "1/2", "-"]]),
    ("Faithful (byte-identical) rate per arm, pooled over models",
     ["arm", "n", "faithful", "rate", "95% CI"],
     [["plain", "4", "2", "50.0%", "15.0%-85.0%"], ["strict", "2", "0", "0.0%", "0.0%-65.8%"]]),
    ("Faithful (byte-identical) rate per model, over both arms",
     ["model", "n", "faithful", "rate", "95% CI"],
     [["m", "6", "2", "33.3%", "9.7%-70.0%"]]),
    ("Failure taxonomy (responses per class; ours taxonomy)",
     ["arm", *OURS],
     [["plain", "2", "1", "0", "0", "1", "0", "0", "0"], ["strict", "0", "0", "1", "0", "0", "0", "1", "0"]]),
    ("Near-miss sub-labels",
     ["class", "sub-label", "count"],
     [["truncated", "prefix", "1"], ["faithful_normalized", "quotes", "1"], ["rewritten", "lead_in", "1"],
      ["corrected", "-", "1"]]),
    # S01 failed 2 of 3 (truncated/prefix first seen), S02 1 of 2; S03 never failed and is not listed
    ("Hardest items",
     ["item", "failed", "most common failure", "gold sentence"],
     [["S01", "2/3", "truncated/prefix", LONG_GOLD[:70]], ["S02", "1/2", "corrected/-", "g S02"]]),
]
LAST_LINE = "Failed quotes of dirty items that kept the planted error: 1"


def parse_tables(text: str) -> tuple[list[tuple[str, list[str], list[list[str]]]], list[str]]:
    """(title, header, rows) per rich table, and the lines outside any table."""
    tables, title, header, rows = [], [], None, []

    def flush():
        nonlocal title, header, rows
        if header is not None:
            tables.append((" ".join(title), header, rows))
        title, header, rows = [], None, []

    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s[0] in "┏┡└":
            if s[0] == "└":
                flush()
            continue
        if s[0] in "┃│":
            cells = [c.strip() for c in s[1:-1].replace("┃", "│").split("│")]
            if s[0] == "┃":
                header = cells
            else:
                rows.append(cells)
            continue
        title.append(s)  # a title line (rich wraps a title wider than its table), or a loose line
    return tables, title  # lines after the last table belong to no table


def printed(summary, width=300):
    buf = io.StringIO()
    render(summary, Console(file=buf, width=width, color_system=None))
    return buf.getvalue()


def test_every_printed_cell_by_hand():
    tables, loose = parse_tables(printed(summarise(ROWS)))
    assert tables == EXPECTED
    assert loose == [LAST_LINE]


def test_long_model_labels_fold_instead_of_being_cut():
    label = "org/a-model-with-a-long-name-0123456789abcdef"
    rows = [dict(r, model_label=label) for r in ROWS]
    text = printed(summarise(rows), width=70)
    assert "…" not in text.split("Failure taxonomy")[0]  # the three tables with a model or arm column
    tables, _ = parse_tables(text)
    # every line of the first column, joined, spells the label once per table row (no cell is cut)
    assert "".join(r[0] for r in tables[0][2]) == label * 2
    assert "".join(r[0] for r in tables[2][2]) == label


def test_a_summary_saved_before_pooled_rows_and_classes_still_prints():
    old = {k: v for k, v in summarise(ROWS).items()
           if k not in ("pooled_by_arm", "per_model", "classes", "taxonomy_name")}
    tables, loose = parse_tables(printed(old))
    assert [t[0] for t in tables] == [
        "Exact Words: faithful (byte-identical) rate per model and arm",
        "Faithful (byte-identical) rate per arm, pooled over models",
        "Faithful (byte-identical) rate per model, over both arms",
        "Failure taxonomy (responses per class; ours taxonomy)",
        "Near-miss sub-labels", "Hardest items"]
    assert tables[1][2] == [] and tables[2][2] == []
    assert tables[3] == EXPECTED[3]
    md = to_markdown(old)
    assert "## Failure taxonomy (ours)" in md
    assert "| arm | " + " | ".join(OURS) + " |" in md


def test_paper_taxonomy_titles():
    tables, _ = parse_tables(printed(summarise(ROWS, taxonomy="paper")))
    what = "paper's faithful (exact or normalised)"
    assert [t[0] for t in tables[1:4]] == [
        f"Faithful ({what}) rate per arm, pooled over models",
        f"Faithful ({what}) rate per model, over both arms",
        "Failure taxonomy (responses per class; paper taxonomy)"]
    # paper: faithful includes the normalised match, so plain has 3 of 4
    assert tables[1][2][0] == ["plain", "4", "3", "75.0%", tables[1][2][0][4]]


def test_saved_json_is_indented_utf8_and_the_folder_is_made(tmp_path):
    rows = [dict(r, model_label="modèle — m") for r in ROWS]
    summary = summarise(rows)
    out = tmp_path / "a" / "b"
    j, m = write_tables(summary, out)
    assert (j, m) == (out / "quote_table.json", out / "quote_table.md")
    text = j.read_text(encoding="utf-8")
    assert text == json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
    assert '\n  "rates": [\n    {\n      "model": "modèle — m",' in text
    assert json.loads(text) == json.loads(json.dumps(summary))
    assert m.read_text(encoding="utf-8") == to_markdown(summary)
    write_tables(summary, out)  # an existing folder is fine: tables are rewritten in place
    assert j.read_text(encoding="utf-8") == text


class Spec(BaseModel):
    suite: str = "quote-tables-test"


class QuoteRow(Record):
    model: str
    item_id: str


def test_load_rows_labels_records_with_their_provenance(tmp_path):
    run = tmp_path / "run"
    with RunStore.open(run, Spec()) as st:
        st.ensure_table(TABLE, QuoteRow)
        st.con.execute("INSERT INTO provenance VALUES (?, ?)",
                       ["p1", json.dumps({"source": "org/model", "sha256": "0123456789abcdef0123", "dtype": "bf16"})])
        st.write(TABLE, [QuoteRow(key="k1", provenance_id="p1", model="embedded", item_id="S01"),
                         QuoteRow(key="k2", provenance_id="gone", model="embedded", item_id="S02")])
    rows = sorted(load_rows([run]), key=lambda r: r["key"])
    assert [(r["key"], r["item_id"], r["model_label"], r["run"]) for r in rows] == [
        ("k1", "S01", "org/model [0123456789ab, bf16]", str(run)),
        ("k2", "S02", "embedded [?, ?]", str(run)),  # no provenance record: the stored model name, unknowns as ?
    ]
    # read-only: while another writer holds the run's lock (an exclusive flock on RUN/.lock, taken here on a
    # file description of our own, exactly as a second process would), reading still works
    fd = os.open(run / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert len(load_rows([run, run])) == 4
    finally:
        os.close(fd)


def test_repeats_dirty_items_and_the_order_of_hardest_items_by_hand():
    rows = [
        _row("A", "plain", "faithful", repeat=2),
        _row("B", "plain", "faithful", repeat=0), _row("C", "plain", "faithful", repeat=0),
        _row("D", "plain", "truncated", "prefix", repeat=0),
        _row("B", "plain", "faithful", repeat=1), _row("C", "plain", "truncated", "prefix", repeat=1),
        _row("D", "plain", "truncated", "suffix", repeat=1), _row("D", "plain", "rewritten", None, repeat=1),
        # dirty: a normalised match that kept the planted error is faithful, so it is not a failed quote
        _row("E", "plain", "faithful_normalized", "quotes", repeat=0, dirty=True, planted=True),
    ]
    s = summarise(rows)
    assert s["taxonomy_name"] == "ours"
    (rate,) = s["rates"]
    # repeat 0: B, C faithful, D not, E normalised -> 2/4; repeat 1: B of B, C, D, D -> 1/4; repeat 2: A -> 1/1
    assert rate["repeats"] == 3 and rate["repeat_rates"] == [0.5, 0.25, 1.0]
    assert rate["repeat_spread"] == 0.75
    assert (rate["dirty_n"], rate["corrected"]) == (1, 0)
    assert s["failed_dirty_with_planted_error_intact"] == 0
    # D failed 3 of 3, C 1 of 2; A and B never, E is a normalised match
    assert [(h["item_id"], h["failures"], h["attempts"], h["most_common"]) for h in s["hardest_items"]] == [
        ("D", 3, 3, "truncated/prefix"), ("C", 1, 2, "truncated/prefix")]
    # ordered by failure rate, not by count: 1 of 1 comes before 2 of 4
    rate_rows = [_row("X", "plain", "rewritten"), *[_row("Y", "plain", c) for c in
                                                     ("rewritten", "rewritten", "faithful", "faithful")]]
    assert [h["item_id"] for h in summarise(rate_rows)["hardest_items"]] == ["X", "Y"]


def test_at_most_ten_hardest_items_by_default():
    rows = [_row(f"S{i:02d}", "plain", "rewritten") for i in range(12)]
    assert [h["item_id"] for h in summarise(rows)["hardest_items"]] == [f"S{i:02d}" for i in range(10)]
    assert len(summarise(rows, top=3)["hardest_items"]) == 3


def test_markdown_shows_a_missing_sub_label_as_a_dash():
    md = to_markdown(summarise(ROWS))
    assert "| corrected | \\- | 1 |" in md  # markdown_table escapes a lone dash (it would start a list)
    assert "| S02 | 1/2 | corrected/- | g S02 |" in md
