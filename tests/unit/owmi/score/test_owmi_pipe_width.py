"""``owmi summary`` piped to a file keeps every column of its table: rich assumed 80 columns for a
non-terminal and cut the columns (audit, issue 26 item 2). Real DuckDB run directory, real CLI."""

from __future__ import annotations

from typer.testing import CliRunner

from tamperbench.cli import app
from tests.unit.owmi.score.test_owmi_summary_bite import _records, _write


def test_piped_summary_is_not_cut_at_80_columns(tmp_path):
    run = tmp_path / "run"
    _write(run, _records())
    res = CliRunner().invoke(app, ["owmi", "summary", str(run)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    cols = ("track", "scope", "condition", "paired w/ intervention", "yes-rate (descr.)", "C rubric flag", "mean JS",
            "causal effect")
    assert any(all(c in line for c in cols) for line in lines), "\n".join(lines)
    assert not any("…" in line for line in lines)
    assert max(map(len, lines)) > 80
