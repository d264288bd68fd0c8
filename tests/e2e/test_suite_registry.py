"""A toy suite written here, outside the package, shows up everywhere a built-in suite does.

Registered only through ``TAMPERBENCH_SUITES`` (no edit to core files, no reinstall): it must be
listed by ``tamperbench --help``, run by ``tamperbench run SPEC.json`` into a real DuckDB store,
printed by its own table renderer and rendered by ``tamperbench report``; ``tamperbench run SPEC.json
--dry-run`` prints its registered plan, and its runner's progress bar counts down from the same
bound through the registry (``progress.countdown``), all without a shared module knowing the suite. Real subprocess CLI for
the help and the sub-app (both mounted when ``tamperbench.cli`` is imported); ``run``, ``report`` and the
two refusals of a spec file run the same entry point in-process (``tb_inprocess``), where the registry
reads the variable per call (``tamperbench run`` keeps its subprocess test in test_cli_errors.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

TOY = textwrap.dedent('''
    """A toy suite: stores n records whose value is i squared."""
    from typing import Literal

    import typer
    from pydantic import Field

    from tamperbench.spec_base import FrozenSpec
    from tamperbench.store import Record, RunStore
    from tamperbench.suites import Suite

    app = typer.Typer(help="toy", no_args_is_help=True)


    @app.command()
    def hello() -> None:
        """Say hello from the toy suite."""
        print("hello from toy")


    @app.command()
    def other() -> None:
        """A second command so typer keeps the group."""


    class ToySpec(FrozenSpec):
        suite: Literal["toy"] = "toy"
        n: int = Field(ge=1)


    class ToyRecord(Record):
        i: int
        square: int


    def unit_tokens(spec, i):
        """The row-token model: a toy unit 'decodes' i + 1 tokens."""
        return i + 1


    def _pending(spec, store):
        have = store.keys("toy_rows") if store.has_table("toy_rows") else set()
        return [i for i in range(spec.n) if f"k{i}" not in have]


    def plan(spec, out, backend):
        from tamperbench.estimate import Plan, open_read_only
        from tamperbench.suites import get_suite

        store = open_read_only(out)
        try:
            pending = _pending(spec, store)
        finally:
            store.close()
        return Plan("toy", len(pending), spec.n - len(pending), get_suite("toy").row_tokens_for(spec, pending),
                    0, 1, unit_name="rows", notes=["a toy plan"])


    def run(spec, out, *, new=False):
        import sys

        from rich.console import Console

        from tamperbench.progress import ETA_FIELDS, countdown, progress_bar

        with RunStore.open(out, spec, new=new) as store:
            store.ensure_table("toy_rows", ToyRecord)
            pending = _pending(spec, store)
            eta = countdown("toy", spec, pending)  # the dry run's bound, through the registry
            with progress_bar("toy", *ETA_FIELDS, unit="rows", console=Console(file=sys.stderr, width=200)) as bar:
                task = bar.add_task("rows", total=len(pending), **eta.fields())
                eta.attach(bar, task)
                for i in pending:
                    store.write("toy_rows", [ToyRecord(key=f"k{i}", i=i, square=i * i)])
                    eta.add(unit_tokens(spec, i))
                    bar.advance(task)


    def tables(run_dir, console):
        with RunStore.open_existing(run_dir, read_only=True) as store:
            total = sum(r["square"] for r in store.rows("toy_rows"))
        console.print(f"toy table: sum of squares = {total}")


    def section(runs, writer):
        from tamperbench.report.site.model import Section
        from tamperbench.report.site.tables import LeaderTable

        table = LeaderTable(slug="toy", title="Toy rows stored", columns=["run", "rows"])
        for run in runs:
            with RunStore.open_existing(run.path, read_only=True) as store:
                table.add(run.path.name, len(store.rows("toy_rows")))
        return Section(suite="toy", title="Toy suite", tables=[table])


    SUITE = Suite(name="toy", help="Toy suite registered from a test.", cli="toy_suite:app",
                  spec="toy_suite:ToySpec", runner="toy_suite:run", tables="toy_suite:tables",
                  report="toy_suite:section", plan="toy_suite:plan", row_tokens="toy_suite:unit_tokens")
''')


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               TAMPERBENCH_SUITES="toy_suite:SUITE", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "tamperbench.cli", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)


def test_toy_suite_in_help_run_and_report(tmp_path, toy_inprocess):
    helped = _cli(tmp_path, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "toy" in helped.stdout and "Toy suite registered from a test." in helped.stdout
    assert "sleight" in helped.stdout and "quote" in helped.stdout  # built-ins still listed

    sub = _cli(tmp_path, "toy", "hello")
    assert sub.returncode == 0 and "hello from toy" in sub.stdout, sub.stderr

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"suite": "toy", "n": 4}))
    ran = toy_inprocess("run", str(spec), "--out", str(tmp_path / "run"))
    assert ran.returncode == 0, ran.stderr
    assert "sum of squares = 14" in ran.stdout  # 0 + 1 + 4 + 9, by hand
    assert re.search(r"toy rows .*4/4 10/10 tok", ran.stderr), ran.stderr  # the bar: 1 + 2 + 3 + 4 tokens
    with duckdb.connect(str(tmp_path / "run" / "records.duckdb"), read_only=True) as con:
        assert con.execute('SELECT count(*), sum(square) FROM "toy_rows"').fetchone() == (4, 14)
    assert json.loads((tmp_path / "run" / "spec.json").read_text()) == {"suite": "toy", "n": 4}

    rep = toy_inprocess("report", str(tmp_path / "run"), "--out", str(tmp_path / "report"))
    assert rep.returncode == 0, rep.stderr
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<h2>Toy suite</h2>" in page and "Toy rows stored" in page
    assert (tmp_path / "report" / "tables" / "toy.csv").read_text() == "run,rows\nrun,4\n"


@pytest.fixture
def toy_inprocess(tmp_path, monkeypatch, tb_inprocess):
    """``tamperbench ARGS`` in-process with this test's toy suite registered through the variable."""
    (tmp_path / "toy_suite.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_suite", raising=False)  # this test's file, not an earlier import
    yield lambda *args: tb_inprocess(*args, cwd=tmp_path, env={"TAMPERBENCH_SUITES": "toy_suite:SUITE"})
    sys.modules.pop("toy_suite", None)


def test_toy_suite_dry_run_through_the_registry(tmp_path, toy_inprocess):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"suite": "toy", "n": 4}))
    dry = toy_inprocess("run", str(spec), "--out", str(tmp_path / "run"), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "plan: toy: 4 rows in the spec, 0 already stored, 4 to run" in dry.stdout, dry.stdout
    assert "tokens to decode: at most 10 " in dry.stdout and "note: a toy plan" in dry.stdout  # 1 + 2 + 3 + 4
    assert "dry run: nothing was decoded or stored" in dry.stdout
    assert not (tmp_path / "run").exists()  # a dry run creates nothing
    assert toy_inprocess("run", str(spec), "--out", str(tmp_path / "run")).returncode == 0
    again = toy_inprocess("run", str(spec), "--out", str(tmp_path / "run"), "--dry-run")  # what a resume skips
    assert "4 rows in the spec, 4 already stored, 0 to run" in again.stdout, again.stdout


def test_toy_spec_constraint_refused_before_any_run_dir(tmp_path, toy_inprocess):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"suite": "toy", "n": 0}))
    proc = toy_inprocess("run", str(spec), "--out", str(tmp_path / "run"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "field 'n'" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_unknown_suite_lists_registered_ones(tmp_path, toy_inprocess):
    spec = tmp_path / "spec.json"
    for body in ({"suite": "owmi-typo"}, {"model": "embedded"}):
        spec.write_text(json.dumps(body))
        proc = toy_inprocess("run", str(spec), "--out", str(tmp_path / "run"))
        assert proc.returncode == 2
        line = proc.stderr.strip()
        assert "\n" not in line and "field 'suite'" in line, line
        for name in ("quote", "sleight", "toy"):
            assert name in line, line
        assert not (tmp_path / "run").exists()
