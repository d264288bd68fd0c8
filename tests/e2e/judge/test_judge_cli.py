"""`tamperbench judge ...` as a user runs it: real run directories; real subprocesses for `evidence` (the
command's smoke test) and the `annotate` server, the console entry point in-process (``tb_inprocess``,
tests/conftest.py, on the session's loaded model) where a test is about output, tables and statuses."""

import json
import os
import subprocess
import sys
import urllib.request

import pytest

from tamperbench.judge.samples import SAMPLES, sample_rows, write_fixture_run
from tamperbench.store import RunStore

JUDGE_TABLES = {"judge_votes", "judge_verdicts", "judge_evidence", "judge_agreement", "judge_parse_rates",
                "human_labels"}


ENV = {**os.environ, "COLUMNS": "200"}  # rich wraps tables to 80 columns when not on a terminal


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "tamperbench.cli", "judge", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def judge_tables(run):
    with RunStore.open_existing(run) as s:
        return set(s.tables()) & JUDGE_TABLES


def assert_user_error(proc, fragment):
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], proc.stderr


def test_bad_inputs_are_one_line_errors_and_write_nothing(tmp_path, tb_inprocess):
    def cli(*args):  # the entry point in-process: the subprocess route is test_evidence_command_offline's
        return tb_inprocess("judge", *args, env={"COLUMNS": "200"})

    empty = write_fixture_run(tmp_path / "empty", [])
    assert_user_error(cli("run", str(empty), "--judge", "embedded"), "no sleight records")
    assert_user_error(cli("annotate", str(empty), "--sample", "1"), "no sleight records")
    assert judge_tables(empty) == set()

    run = write_fixture_run(tmp_path / "run", sample_rows())
    assert_user_error(cli("run", str(run), "--judge", str(tmp_path / "no-such-model")), "--judge")
    assert_user_error(cli("annotate", str(run), "--sample", "999"), "--sample: 999 is larger")
    assert_user_error(cli("agreement", str(run)), "no judge verdicts")
    assert_user_error(cli("run", str(run), "--judge", "embedded", "--fence", "bogus"), "--fence")
    assert_user_error(cli("run", str(tmp_path / "nope"), "--judge", "embedded"), "not a directory")
    assert judge_tables(run) == set()


def test_evidence_command_offline(tmp_path):
    run = write_fixture_run(tmp_path / "run", sample_rows())
    proc = cli("evidence", str(run))
    assert proc.returncode == 0, proc.stderr
    assert f"{len(SAMPLES)} replies scored" in proc.stdout
    assert judge_tables(run) == {"judge_evidence"}


@pytest.mark.model
def test_run_annotate_agreement_with_embedded_judge(tmp_path, tb_inprocess):
    def cli(*args):
        return tb_inprocess("judge", *args, env={"COLUMNS": "200"})

    run = write_fixture_run(tmp_path / "run", sample_rows(SAMPLES[:1]))  # one reply: the CPU is the limit
    proc = cli("run", str(run), "--judge", "embedded", "--max-new-tokens", "16", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    assert "1 judged" in proc.stdout and "unparsed rate" in proc.stdout and "evidence_vs_jury" in proc.stdout
    assert judge_tables(run) == JUDGE_TABLES - {"human_labels"}

    ann = subprocess.Popen([sys.executable, "-m", "tamperbench.cli", "judge", "annotate", str(run), "--sample", "1",
                            "--port", "0", "--exit-when-done"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=ENV)
    try:
        url = ann.stdout.readline().split(": ", 1)[1].strip()
        base, token = url.split("/?token=")
        req = urllib.request.Request(base + "/api/items", headers={"X-Annotate-Token": token})
        items = json.load(urllib.request.urlopen(req, timeout=30))["items"]
        for it in items:
            body = {"trial_key": it["trial_key"], "flagged": False, "corrected": True, "derailed": False,
                    "aware": False, "note": ""}
            req = urllib.request.Request(base + "/api/label", data=json.dumps(body).encode(), method="POST",
                                         headers={"X-Annotate-Token": token, "Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=30).read()
        out, err = ann.communicate(timeout=60)
    finally:
        if ann.poll() is None:
            ann.kill()
    assert ann.returncode == 0, err
    assert "1 of 1 sampled replies labelled" in out

    proc = cli("agreement", str(run))
    assert proc.returncode == 0, proc.stderr
    assert "judge_vs_human" in proc.stdout and "human:human" in proc.stdout
    with RunStore.open_existing(run) as s:
        rows = s.rows("judge_agreement", "WHERE kind = 'judge_vs_human' AND rater_a = 'jury'")
        (verdict,) = s.rows("judge_verdicts")
    assert {r["label"] for r in rows} == {"flagged", "corrected", "derailed", "aware"}
    human = {"flagged": False, "corrected": True, "derailed": False, "aware": False}  # what we posted above
    for r in rows:
        # a no-majority (unparsed) verdict is left out (n = 0), never read as False (n = 1)
        jury = verdict[r["label"]]
        assert r["n"] == (0 if jury is None else 1), (r, jury)
        assert r["accuracy"] == (None if jury is None else float(jury == human[r["label"]])), (r, jury)
