"""The sleight CLI end to end on the embedded model: run, resume (writes nothing), table, bad input."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tamperbench.errors import UserError
from tamperbench.sleight.cli import app
from tamperbench.store import RunStore


ARGS = ["run", "--preset", "quick", "--questions", "2", "--words", "2", "--max-new-tokens", "32", "--device", "cpu"]


def _counts(run_dir):
    with RunStore.open_existing(run_dir, read_only=True) as store:
        return store.count("sleight_trials"), store.count("sleight_clean"), store.rows("sleight_trials")


@pytest.mark.model
def test_run_resume_and_table(tmp_path):
    run_dir = tmp_path / "run"
    first = CliRunner().invoke(app, [*ARGS, "--out", str(run_dir)])
    assert first.exit_code == 0, first.output
    n_trials, n_clean, rows = _counts(run_dir)
    assert (n_trials, n_clean) == (4, 2)
    assert {r["substitution"] for r in rows} == {"Mandela effect", "scarf"}
    touched = [r for r in rows if not r["untouched"]]
    assert touched, "the quick questions were chosen so that SmolLM2 says 'the'"
    for r in touched:
        assert r["swap_count"] == len(r["swap_positions"]) >= 1
        assert r["n_tokens"] <= 32 and r["fork_at"] == r["swap_positions"][0]
        assert r["substitution"].lower().split()[0] in r["reaction_text"].lower()
        assert 0 < r["coverage"] <= 1

    again = CliRunner().invoke(app, [*ARGS, "--out", str(run_dir)])
    assert again.exit_code == 0, again.output
    assert "nothing to do" in again.output
    assert _counts(run_dir)[:2] == (4, 2)

    table = CliRunner().invoke(app, ["table", str(run_dir)])
    assert table.exit_code == 0, table.output
    assert "Table 1" in table.output and "Table 3" in table.output
    saved = json.loads((run_dir / "tables.json").read_text())
    assert saved["models"][0]["trials"] == 4
    assert (run_dir / "tables.md").read_text().count("|") > 20


# pure: refused before any model is loaded, so it belongs to the fast suite
@pytest.mark.parametrize(
    "extra, field",
    [(["--questions", "0"], "--questions"), (["--max-new-tokens", "0"], "--max-new-tokens"),
     (["--preset", "huge"], "--preset"), (["--words", "0"], "--words")],
)
def test_bad_input_is_a_user_error(tmp_path, extra, field):
    res = CliRunner().invoke(app, ["run", "--out", str(tmp_path / "r"), *extra])
    assert isinstance(res.exception, UserError) and field in str(res.exception)
    assert not (tmp_path / "r").exists()


@pytest.mark.model
def test_unproducible_trigger_warns_and_covers_nothing(tmp_path):
    run_dir = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--questions", "1", "--words", "1", "--max-new-tokens", "8", "--device", "cpu",
                                   "--trigger", "xylophonically", "--out", str(run_dir)])
    assert res.exit_code == 0, res.output
    assert "warning" in res.output and "xylophonically" in res.output
    n_trials, _, rows = _counts(run_dir)
    assert n_trials == 1 and rows[0]["coverage"] == 0.0 and rows[0]["untouched"] and rows[0]["swap_count"] == 0
    assert rows[0]["trigger"] == "xylophonically"
