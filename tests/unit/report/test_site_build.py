"""The report site's bad-input handling and table exports, without a browser (fast).

Runs are synthetic (real record classes and store, no model).
"""

from __future__ import annotations

import csv
import io
import json

import duckdb
import pytest

from tamperbench.errors import UserError
from tamperbench.report.site import build_site
from tamperbench.report.site.tables import Cell, LeaderTable, cell, estimate_cell
from tamperbench.report.site.writer import js_payload
from tamperbench.sleight.synthetic import write_synthetic_run
from tamperbench.store.run_store import DB_FILE


def test_bad_runs_are_listed_and_the_site_builds_for_the_good_ones(tmp_path):
    good = write_synthetic_run(tmp_path / "good", questions=2, words=2)
    old = write_synthetic_run(tmp_path / "old", questions=1, words=1)
    con = duckdb.connect(str(old / DB_FILE))
    con.execute('UPDATE "sleight_trials" SET schema_version = 99')
    con.close()
    empty = write_synthetic_run(tmp_path / "empty", questions=1, words=1)
    con = duckdb.connect(str(empty / DB_FILE))
    con.execute('DELETE FROM "sleight_trials"')
    con.execute('DELETE FROM "sleight_clean"')
    con.close()
    notrun = tmp_path / "notrun"
    notrun.mkdir()
    garbage = write_synthetic_run(tmp_path / "garbage", questions=1, words=1)
    (garbage / "spec.json").write_text("{not json")
    index, problems = build_site([good, old, empty, notrun, garbage], tmp_path / "site")
    assert index.is_file()
    assert len(problems) == 4
    assert any("old" in p and "schema version 99" in p and "reads version" in p for p in problems)
    assert any("empty" in p and "empty" in p.split(":", 1)[1] for p in problems)
    assert any("notrun" in p and "not a tamperbench run" in p for p in problems)
    assert any("garbage" in p and "not valid JSON" in p for p in problems)
    html = index.read_text()
    assert "Runs left out" in html and "schema version 99" in html
    assert (tmp_path / "site" / "problems.txt").read_text().count("\n") == 4


def test_no_usable_run_is_one_user_error(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(UserError, match="no usable run"):
        build_site([tmp_path / "x"], tmp_path / "site")


def test_unwritable_out_is_a_user_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError, match="--out"):
        build_site([write_synthetic_run(tmp_path / "r", questions=1, words=1)], blocker / "site")


def test_exports_escape_hostile_cells():
    t = LeaderTable(slug="t", title="T", columns=["model", "value"])
    t.add("a|b <script>", Cell("=cmd()", None))
    t.add(cell("m_2 & 50%"), estimate_cell({"mean": 0.5, "lo": 0.25, "hi": 0.75}))
    md = t.to_markdown()
    assert "a\\|b &lt;script&gt;" in md and "<script>" not in md
    rows = list(csv.reader(io.StringIO(t.to_csv())))
    assert rows[1] == ["a|b <script>", "'=cmd()"]  # formula defused, text kept
    assert rows[2][1] == "+0.50 [+0.25, +0.75]"  # a signed number is not a formula
    tex = t.to_latex()
    assert r"m\_2 \& 50\%" in tex and r"\begin{tabular}{ll}" in tex
    with pytest.raises(ValueError):
        t.add("only one cell")


def test_cells_sort_by_value_and_blanks_last():
    assert estimate_cell({"mean": -1.25, "lo": None, "hi": None}).sort == -1.25
    assert estimate_cell(None).sort_attr == ""
    assert cell(None).text == "" and cell(3).sort == 3.0 and cell("x").sort == "x"


def test_js_payload_cannot_close_a_script():
    text = js_payload({"r": "</script><script>alert(1)</script>&\u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text)["r"] == "</script><script>alert(1)</script>&\u2028"


def test_the_run_page_shows_each_session_and_survives_hostile_ones(tmp_path):
    """A run's sessions table (``runs.session``) on its page: the thread count and command of each process,
    escaped; a row that is not an object, or whose fields have the wrong shapes, neither breaks the build nor
    shows; a run without the table says its sessions were not recorded."""
    from tamperbench.store import RunStore
    from tamperbench.store.sessions import put_session

    run = write_synthetic_run(tmp_path / "run", questions=1, words=1)
    old = write_synthetic_run(tmp_path / "old", questions=2, words=1, model="another-model")
    with RunStore.open_existing(run) as store:
        put_session(store, {"session": "a", "provenance_id": "p", "recorded_at": "2026-12-06T01:00:00+00:00",
                           "torch_threads": 3, "env": {"OMP_NUM_THREADS": "3"},
                           "argv": ["tamperbench", "<script>alert(1)</script>"], "tamperbench_commit": "f" * 40,
                           "tamperbench_dirty": True, "cpu_model": "Some CPU", "cpu_count": 7})
        put_session(store, {"session": "b", "provenance_id": "p", "recorded_at": "2026-12-06T02:00:00+00:00",
                           "torch_threads": "many", "env": ["not", "a", "mapping"], "argv": "rm -rf /"})
        store.con.execute("INSERT INTO sessions VALUES ('c', '[1, 2]')")
    index, problems = build_site([run, old], tmp_path / "site")
    assert problems == []
    pages = sorted((tmp_path / "site" / "runs").glob("run-*.html"))
    by_folder = {p.read_text().split("Folder <code>", 1)[1].split("</code>", 1)[0]: p.read_text() for p in pages}
    page, old_page = by_folder[str(run)], by_folder[str(old)]
    assert "<td class=\"num\">3</td>" in page and "OMP_NUM_THREADS=3" in page and "f" * 40 in page
    assert "(with uncommitted changes)" in page and "Some CPU (7)" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "many" not in page and "rm -rf" not in page and page.count("2026-12-06T0") == 2  # rows a and b only
    assert "Not recorded: the run was written before" in old_page
