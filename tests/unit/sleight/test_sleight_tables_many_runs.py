"""Tables over several runs (one model each): Table 2's pooled row sums the counts of every model of
every run before dividing, as the reference's table script pools its models. Expected values are
worked out by hand in the comments; no model is loaded."""

import io
import json

import pytest
from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.sleight.spec import build_spec
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE
from tamperbench.sleight.tables import render, render_runs
from tamperbench.store import RunStore

from test_sleight_summary_store import CLEAN, TRIALS, verdict  # noqa: E402  (same folder: the hand-made records)


def _copy(rec, prefix: str, model: str, pid: str):
    extra = {"clean_key": prefix + rec.clean_key} if hasattr(rec, "clean_key") else {}
    return rec.model_copy(update={"key": prefix + rec.key, "model": model, "provenance_id": pid, **extra})


def _run(path, prefix: str, model: str, verdicts: list[tuple[str, bool, bool]], **spec_kw):
    spec = build_spec(model="embedded", preset="quick", max_new_tokens=8).model_copy(update=spec_kw)
    st = RunStore.open(path, spec)
    st.write(CLEAN_TABLE, [_copy(c, prefix, model, "p-" + model) for c in CLEAN])
    st.write(TRIALS_TABLE, [_copy(t, prefix, model, "p-" + model) for t in TRIALS])
    st.write("judge_verdicts", [verdict(prefix + k, f, None, d, None, not (f or d)).model_copy(
        update={"trial_key": prefix + k}) for k, f, d in verdicts])
    return st


@pytest.fixture
def two_runs(tmp_path):
    # TRIALS: t1 and t4 are entity ("Mandela effect") trials, t2 a substituted word, t3 untouched.
    # run A (model m): t1 flagged, t4 flagged, t2 not flagged; derailed: t2 only.
    #   entity: n 2, flagged 2, derailed 0; words: n 1, flagged 0, derailed 1
    # run B (model n): b4 has no verdict (unjudged: not counted); b1 not flagged, derailed; b2 flagged, derailed.
    #   entity: n 1, flagged 0, derailed 1; words: n 1, flagged 1, derailed 1
    a = _run(tmp_path / "run_a", "a", "m", [("t1", True, False), ("t4", True, False), ("t2", False, True)])
    b = _run(tmp_path / "run_b", "b", "n", [("t1", False, True), ("t2", True, True)])
    yield a, b
    a.close()
    b.close()


def test_pooled_row_sums_counts_over_runs(two_runs, tmp_path):
    out = render_runs(list(two_runs), Console(file=io.StringIO()), out_dir=tmp_path / "pooled")
    rows = {r[0]: r for r in out["tables"]["table2"]["rows"]}
    assert set(rows) == {"m", "n", "Pooled (all models)"}
    # pooled entity flagged: (2 + 0) / (2 + 1) = 66.7% -> 67 (a mean of the two models' rates would say 50);
    # words flagged (0 + 1) / (1 + 1) = 50%; gap +17.
    # derailed: entity (0 + 1) / 3 = 33%, words (1 + 1) / 2 = 100%, gap -67
    assert rows["Pooled (all models)"][1:7] == ["67 (n=3/3)", "50 (n=2/2)", "+17", "33 (n=3/3)", "100 (n=2/2)", "-67"]
    paper = {r[0]: r for r in out["paper_tables"]["table2"]["rows"]}
    assert paper["Pooled (all models)"][1:] == ["67", "50", "+17", "33", "100", "-67"]
    assert rows["m"][1:3] == ["100 (n=2/2)", "0 (n=1/1)"] and rows["n"][1:3] == ["0 (n=1/1)", "100 (n=1/1)"]
    saved = json.loads((tmp_path / "pooled" / "tables.json").read_text())
    assert saved["runs"] == [str(s.run_dir) for s in two_runs]
    md = (tmp_path / "pooled" / "tables.md").read_text()
    assert "run\\_a: 4 questions x 3 substitutions" in md and "run\\_b:" in md
    # the runs themselves are untouched: the pooled tables went to --out only
    assert not (two_runs[0].run_dir / "tables.json").exists()


def test_one_run_writes_into_the_run_as_before(two_runs):
    a, _ = two_runs
    out = render(a, Console(file=io.StringIO()))
    assert [r[0] for r in out["tables"]["table2"]["rows"]] == ["m", "Pooled (all models)"]
    # one run: pooled = that model's own counts (entity 2/2, words 0/1)
    assert out["tables"]["table2"]["rows"][-1][1:3] == ["100 (n=2/2)", "0 (n=1/1)"]
    assert (a.run_dir / "tables.md").read_text().splitlines()[2].endswith("4 questions x 3 substitutions.")


def test_same_model_in_two_runs_is_refused(tmp_path):
    a = _run(tmp_path / "a", "a", "m", [])
    b = _run(tmp_path / "b", "b", "m", [])
    try:
        with pytest.raises(UserError, match="model 'm' is in both"):
            render_runs([a, b], Console(file=io.StringIO()), out_dir=tmp_path / "o")
    finally:
        a.close()
        b.close()
    assert not (tmp_path / "o").exists()


def test_runs_with_different_windows_are_refused(tmp_path):
    a = _run(tmp_path / "a", "a", "m", [])
    b = _run(tmp_path / "b", "b", "n", [], window=4)
    try:
        with pytest.raises(UserError, match="spec field 'window' is 4"):
            render_runs([a, b], Console(file=io.StringIO()), out_dir=tmp_path / "o")
    finally:
        a.close()
        b.close()


def test_cli_several_runs_need_out(two_runs, tb_inprocess):
    a, b = two_runs
    proc = tb_inprocess("sleight", "table", a.run_dir, b.run_dir)  # the entry point, in-process
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: --out: required with several runs (the directory for the pooled tables.md and tables.json)"]
