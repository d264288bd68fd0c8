"""The installed ``tamperbench quote`` command, run as a user would (subprocess)."""

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

EXE = str(Path(sys.executable).parent / "tamperbench")


def tb(*args, check_rc=None):
    proc = subprocess.run([EXE, "quote", *map(str, args)], capture_output=True, text=True, timeout=600)
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stdout + proc.stderr
    return proc


@pytest.mark.model
def test_run_then_table_then_resume(tmp_path, tb_inprocess):
    def tb_in(*args, check_rc):  # the first run is the console script's; the rest in-process, same entry point
        proc = tb_inprocess("quote", *args)
        assert proc.returncode == check_rc, proc.stdout + proc.stderr
        return proc

    run = tmp_path / "run"
    out = tb("run", "--model", "embedded", "--arm", "both", "--items", "S17", "--max-new-tokens", "8",
             "--device", "cpu", "--out", run, check_rc=0)
    assert "faithful (byte-identical) rate per model and arm" in out.stdout
    assert "Failure taxonomy" in out.stdout and "Hardest items" in out.stdout
    summary = json.loads((run / "quote_table.json").read_text())
    assert sorted(r["arm"] for r in summary["rates"]) == ["plain", "strict"]
    assert all(r["n"] == 1 for r in summary["rates"])
    assert (run / "quote_table.md").read_text().startswith("# Exact Words summary")

    table = tb_in("table", run, check_rc=0)
    assert "Exact Words" in table.stdout
    tb_in("run", "--model", "embedded", "--arm", "both", "--items", "S17", "--max-new-tokens", "8",
       "--device", "cpu", "--out", run, check_rc=0)
    con = duckdb.connect(str(run / "records.duckdb"))
    assert con.execute("SELECT count(*) FROM quote_trials").fetchone()[0] == 2
    before = con.execute("SELECT key, category, sub_label FROM quote_trials ORDER BY key").fetchall()
    con.execute("UPDATE quote_trials SET category = 'faithful', sub_label = 'tampered' WHERE arm = 'plain'")
    con.close()
    res = tb_in("rescore", run, check_rc=0)
    assert "re-scored 2 stored responses" in res.stdout and "1 verdict(s) changed" in res.stdout
    con = duckdb.connect(str(run / "records.duckdb"), read_only=True)
    assert con.execute("SELECT key, category, sub_label FROM quote_trials ORDER BY key").fetchall() == before
    con.close()


def test_items_export_has_what_outside_collection_needs(tmp_path, tb_inprocess):
    def tb(*args, check_rc):  # the entry point in-process: the console script runs in the score test below
        proc = tb_inprocess("quote", *args)
        assert proc.returncode == check_rc, proc.stdout + proc.stderr

    f = tmp_path / "code.jsonl"
    tb("items", "--preset", "code", "--out", f, check_rc=0)
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    assert len(rows) == 10
    for r in rows:
        assert {"id", "document_id", "instruction", "gold", "planted_span", "corrected_form", "document"} <= set(r)
        assert r["document"].count(r["gold"]) == 1 and r["instruction"].startswith("Quote verbatim the line")
    assert sum(r["planted_span"] is not None for r in rows) == 3
    depth = tmp_path / "depth.jsonl"
    tb("items", "--preset", "depth", "--out", depth, check_rc=0)
    first = json.loads(depth.read_text().splitlines()[0])
    assert first["id"] == "D01" and "=== Document 10: Press release ===" in first["document"]


def test_score_reports_each_bad_line_and_scores_the_rest(tmp_path, tb_inprocess):
    items = tmp_path / "std.jsonl"
    assert tb_inprocess("quote", "items", "--out", items).returncode == 0  # the gold only: in-process
    gold = {r["id"]: r for r in map(json.loads, items.read_text().splitlines())}
    responses = tmp_path / "responses.jsonl"
    responses.write_text("\n".join([
        json.dumps({"item_id": "S01", "response": gold["S01"]["gold"]}),
        "{this is not json",
        json.dumps({"item_id": "S99", "response": "hello"}),
        json.dumps({"item_id": "S05", "response": ""}),
        json.dumps({"item_id": "S16", "response": gold["S16"]["gold"].replace(
            gold["S16"]["planted_span"], gold["S16"]["corrected_form"])}),
    ]) + "\n")
    verdicts = tmp_path / "verdicts.jsonl"
    proc = tb("score", responses, "--out", verdicts, check_rc=1)
    assert f"{responses}:2: malformed JSON" in proc.stderr
    assert f"{responses}:3: unknown item id 'S99'" in proc.stderr
    assert f"{responses}:4: empty response for S05" in proc.stderr
    rows = [json.loads(line) for line in verdicts.read_text().splitlines()]
    assert [(r["item_id"], r["category"]) for r in rows] == [("S01", "faithful"), ("S05", "no_answer"),
                                                              ("S16", "corrected")]
    assert all({"item_id", "category", "sub_label", "evidence"} <= set(r) for r in rows)


def test_user_mistakes_are_one_line_exit_2(tmp_path, tb_inprocess):
    for args, needle in [(("score", tmp_path / "missing.jsonl"), "no such file"),
                         (("run", "--preset", "long", "--out", tmp_path / "r"), "--preset"),
                         (("items", "--preset", "long", "--out", tmp_path / "x.jsonl"), "--preset"),
                         (("table", tmp_path), "not a tamperbench run directory")]:
        proc = tb_inprocess("quote", *args)  # the entry point in-process: messages and status only
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert needle in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
