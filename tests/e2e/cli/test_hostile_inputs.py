"""Issue 15, table-driven: every hostile input it lists, through the real CLI entry point.

Each case prepares its inputs under ``tmp/inputs``, runs ``tamperbench ...`` with ``tmp/cwd`` as the
working directory (in this process through ``tamperbench.cli.main``, the ``tb_inprocess`` fixture of
tests/conftest.py; in a ``python -m tamperbench.cli`` subprocess where the process matters: argv bytes
that are not UTF-8, a cold model cache in its own home, a chmod'ed run), then checks: the exit status; for a refusal, exactly one
stderr line starting ``error:`` that names the culprit, and no traceback; and that no file
appeared anywhere under ``tmp`` except inside the case's declared output paths (so an injected
``COPY ... TO 'pwned.csv'`` or a stray file in the current directory fails the case).

Runs are synthetic sleight runs written through the real store (sleight/synthetic.py): no model.
Cases that need an unwritable place use ``/sys`` (sysfs refuses new files even to root); the
``chmod`` case is skipped when the tests run as root, since root writes through ``chmod 555``.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from tamperbench.sleight.synthetic import write_synthetic_run

TB = [sys.executable, "-m", "tamperbench.cli"]
INJECTED = "x' (FORMAT csv); COPY (SELECT 'INJECTED') TO 'pwned.csv' (FORMAT csv); --"


def _sysfs_refuses_writes() -> bool:
    try:
        (Path("/sys") / "tamperbench-probe").mkdir()
    except OSError:
        return Path("/sys").is_dir()
    (Path("/sys") / "tamperbench-probe").rmdir()
    return False


UNWRITABLE = _sysfs_refuses_writes()


@dataclass
class Case:
    id: str
    prepare: Callable[[Path], tuple[list, list[Path]]]  # inputs dir -> (argv after TB, allowed output paths)
    status: int = 2
    needles: tuple[str, ...] = ()
    check: Callable[[Path, subprocess.CompletedProcess], None] | None = None
    sysfs: bool = False  # uses /sys as the unwritable place


_TEMPLATES: dict[str, Path] = {}  # synthetic runs written once per module, by their arguments
_TEMPLATE_ROOT: list[Path] = []


@pytest.fixture(autouse=True, scope="module")
def _synthetic_run_templates(tmp_path_factory):
    _TEMPLATE_ROOT.append(tmp_path_factory.mktemp("synthetic_templates"))
    yield
    _TEMPLATE_ROOT.clear()
    _TEMPLATES.clear()


def run_dir(inputs: Path, name: str = "run", **kw) -> Path:
    """A fresh copy of a synthetic run written through the real store (copying the files costs ~1 ms,
    writing them ~70 ms); each case may damage its copy."""
    key = repr(sorted(kw.items()))
    if key not in _TEMPLATES:
        _TEMPLATES[key] = write_synthetic_run(_TEMPLATE_ROOT[0] / f"run{len(_TEMPLATES)}", **kw)
    return Path(shutil.copytree(_TEMPLATES[key], inputs / name))


def hostile_table_run(inputs: Path) -> Path:
    run = run_dir(inputs)
    con = duckdb.connect(str(run / "records.duckdb"))
    con.execute('CREATE TABLE "{}" (key VARCHAR, schema_version BIGINT, provenance_id VARCHAR, created_at VARCHAR)'
                .format(INJECTED.replace('"', '""')))
    con.execute('INSERT INTO "{}" VALUES (\'k\', 1, \'\', \'\')'.format(INJECTED.replace('"', '""')))
    con.close()
    return run


def _garbage_spec(inputs: Path) -> Path:
    run = run_dir(inputs)
    (run / "spec.json").write_bytes(b"{\"suite\": \"sleight\", \xff garbage")
    return run


def _other_version(inputs: Path) -> Path:
    run = run_dir(inputs)
    con = duckdb.connect(str(run / "records.duckdb"))
    con.execute("UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    con.close()
    return run


def _file(inputs: Path, name: str, data: bytes) -> Path:
    path = inputs / name
    path.write_bytes(data)
    return path


def _tables_md_is_a_dir(inputs: Path) -> Path:
    run = run_dir(inputs)
    (run / "tables.md").mkdir()  # a directory where the table writer expects a file: it cannot write
    return run


def _image_lines(inputs: Path) -> Path:
    run = run_dir(inputs, replies={0: "<script>alert(1)</script> | ![x](javascript:alert(1)) <img src=x onerror=alert(2)>"})
    (run / "tables.md").write_text("# t\n![unclosed\n![x](javascript:alert(1))\n![](\n| a | ![b |\n")
    return run


def _check_report(tmp: Path, proc) -> None:
    site = tmp / "cwd" / "rep"
    pages = list(site.rglob("*.html"))
    assert len(pages) >= 3  # index, the run's provenance page, the trial viewer
    for page in pages:
        html = page.read_text()
        assert "<script>alert" not in html and "<img src=x" not in html and 'src="javascript' not in html
    for data in site.rglob("data/**/*.js"):  # model text in data scripts cannot close a tag
        assert "<" not in data.read_text()
    for md in site.rglob("tables/*.md"):  # exported Markdown is inert too
        assert "<script>" not in md.read_text() and "<img src=x" not in md.read_text()


def _check_export(tmp: Path, proc) -> None:
    out = tmp / "it's here" / "x.parquet"
    n = duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)", [str(out)]).fetchone()[0]
    assert n == 9  # 3 questions x 3 words, written by write_synthetic_run


def _check_score_out(tmp: Path, proc) -> None:
    assert "scored" in proc.stderr


CASES = [
    # 15.1 export: injection through a table name, a quote in --out, an existing directory, an unwritable place
    Case("export-injected-table-name", lambda i: (["export", hostile_table_run(i), "--format", "csv", "--out", "o.csv"],
                                                  ["o.csv"]), needles=("is not a tamperbench record table",)),
    Case("export-injected-table-flag", lambda i: (["export", hostile_table_run(i), "--table", INJECTED, "--out", "o.csv"],
                                                  ["o.csv"]), needles=("--table", "is not a record table")),
    Case("export-quote-in-out-path", lambda i: (["export", run_dir(i), "--table", "sleight_trials", "--format", "parquet",
                                                 "--out", str(i.parent / "it's here" / "x.parquet")],
                                                [i.parent / "it's here"]), status=0, check=_check_export),
    Case("export-out-existing-dir", lambda i: (["export", run_dir(i), "--table", "sleight_trials", "--out", str(i)], []),
         needles=("--out", "is a directory")),
    Case("export-out-unwritable", lambda i: (["export", run_dir(i), "--out", "/sys/tamperbench-x/o.csv"], []),
         needles=("--out", "/sys/tamperbench-x"), sysfs=True),
    Case("export-other-schema-version", lambda i: (["export", _other_version(i), "--out", "o.csv"], ["o.csv"]),
         needles=("schema version 99", "reads schema version 1")),
    Case("export-garbage-database", lambda i: (["export", _garbage_db(i), "--out", "o.csv"], ["o.csv"]),
         needles=("records.duckdb", "cannot open the run database")),
    # 15.6: one line, never a traceback
    Case("quote-score-binary", lambda i: (["quote", "score", _file(i, "r.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00\xff")], []),
         needles=("r.jsonl", "binary data")),
    Case("quote-score-latin1", lambda i: (["quote", "score", _file(i, "r.jsonl", '{"item_id": "S01", "response": "café"}\n'
                                                                    .encode("latin-1"))], []),
         needles=("r.jsonl", "not UTF-8", "0xe9")),
    Case("quote-score-directory", lambda i: (["quote", "score", i], []), needles=("is a directory",)),
    Case("quote-score-out-unwritable", lambda i: (["quote", "score", _file(i, "r.jsonl", b'{"item_id": "S01", "response": "x"}\n'),
                                                   "--out", "/sys/tamperbench-x/v.jsonl"], []),
         needles=("/sys/tamperbench-x",), sysfs=True),
    Case("run-on-a-directory", lambda i: (["run", i, "--out", "o"], ["o"]), needles=(str("inputs"),)),
    Case("sleight-table-garbage-spec", lambda i: (["sleight", "table", _garbage_spec(i)], []),
         needles=("spec.json", "not valid JSON")),
    Case("report-garbage-spec", lambda i: (["report", _garbage_spec(i), "--out", "rep"], ["rep"]),
         needles=("spec.json", "not valid JSON")),
    Case("answer-non-utf8-bytes", lambda i: ([b"answer", b"caf\xe9 \xff?"], []), needles=("argument 2", "not UTF-8")),
    Case("sleight-table-unwritable-run", lambda i: (["sleight", "table", _tables_md_is_a_dir(i)], []),
         needles=("tables.md", "Is a directory")),
    Case("report-out-under-a-file", lambda i: (["report", run_dir(i), "--out", str(_file(i, "f", b"") / "sub")], []),
         needles=("f/sub", "Not a directory")),
    Case("report-out-unwritable", lambda i: (["report", run_dir(i), "--out", "/sys/tamperbench-report"], []),
         needles=("/sys/tamperbench-report",), sysfs=True),
    Case("report-image-lines-and-markup", lambda i: (["report", _image_lines(i), "--out", "rep"], ["rep"]),
         status=0, check=_check_report),
]


def _garbage_db(inputs: Path) -> Path:
    run = run_dir(inputs)
    (run / "records.duckdb").write_bytes(b"not a database " * 500)
    return run


def listing(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


def run_case(tmp: Path, argv: list, outs: list, **env_extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", **env_extra)
    env.pop("TAMPERBENCH_DEBUG", None)
    args = [os.fsencode(a) if isinstance(a, (str, Path)) else a for a in argv]
    proc = subprocess.run([*map(os.fsencode, TB), *args], capture_output=True, env=env, cwd=tmp / "cwd", timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def assert_outcome(proc, case: Case) -> None:
    """The case's exit status, no traceback, and for a refusal (2) exactly one ``error:`` line holding
    every needle."""
    assert proc.returncode == case.status, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    if case.status == 2:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
        for needle in case.needles:
            assert needle in lines[0], lines[0]


def assert_allowed(tmp: Path, before: set[Path], outs: list) -> None:
    allowed = [(tmp / "cwd" / o if not Path(o).is_absolute() else Path(o)).relative_to(tmp)
               for o in outs if str(Path(o)).startswith(str(tmp)) or not Path(o).is_absolute()]
    new = listing(tmp) - before
    stray = sorted(str(p) for p in new if not any(p == a or a in p.parents for a in allowed))
    assert not stray, f"files appeared outside the output path: {stray}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input(case: Case, tmp_path: Path, tb_inprocess):
    if case.sysfs and not UNWRITABLE:
        pytest.skip("needs /sys (sysfs) to refuse new files")
    (tmp_path / "inputs").mkdir()
    (tmp_path / "cwd").mkdir()
    argv, outs = case.prepare(tmp_path / "inputs")
    before = listing(tmp_path)
    if any(isinstance(a, bytes) for a in argv):  # bytes the interpreter must decode at startup
        proc = run_case(tmp_path, argv, outs)
    else:
        proc = tb_inprocess(*argv, cwd=tmp_path / "cwd")
    assert_outcome(proc, case)
    if case.status != 2:
        assert "error:" not in proc.stderr, proc.stderr
    assert_allowed(tmp_path, before, outs)
    assert not list(Path("/sys").glob("tamperbench-*"))
    if case.check is not None:
        case.check(tmp_path, proc)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod 555; the /sys and tables.md cases cover it")
def test_sleight_table_on_a_chmod_read_only_run(tmp_path):
    (tmp_path / "inputs").mkdir()
    (tmp_path / "cwd").mkdir()
    run = run_dir(tmp_path / "inputs")
    run.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert not os.access(run, os.W_OK)
        proc = run_case(tmp_path, ["sleight", "table", run], [])
    finally:
        run.chmod(stat.S_IRWXU)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "tables.md" in lines[0] and "Permission denied" in lines[0]


@pytest.mark.skipif(not UNWRITABLE, reason="needs /sys (sysfs) to refuse new files")
@pytest.mark.parametrize("suite", ["sleight", "quote"])
def test_run_into_an_unwritable_place_fails_before_loading_the_model(tmp_path, suite):
    """An unwritable --out is one line *before* the model loads: with a cold model cache
    (an empty TAMPERBENCH_HOME) a load would dequantize the GGUF and fill that home."""
    (tmp_path / "cwd").mkdir()
    (tmp_path / "home").mkdir()
    before = listing(tmp_path)
    extra = ["--questions", "1", "--words", "1", "--max-new-tokens", "8"] if suite == "sleight" else ["--preset", "standard"]
    proc = run_case(tmp_path, [suite, "run", "--out", "/sys/tamperbench-run", *extra, "--device", "cpu"], [],
                    TAMPERBENCH_HOME=str(tmp_path / "home"))
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: /sys/tamperbench-run"), proc.stderr
    assert listing(tmp_path) == before  # nothing cached: the model was never loaded


def test_debug_shows_the_traceback_of_a_bug(tmp_path, tb_inprocess, monkeypatch):
    """A real bug (here: a command that raises) is one line and exit 1; --debug gives its traceback.

    The plain case runs the entry point in-process; the two debug cases need the interpreter itself
    (the bug is re-raised and Python prints the traceback and exits 1)."""
    import tamperbench.cli as cli

    monkeypatch.setattr(cli.app, "registered_commands", list(cli.app.registered_commands))  # 'boom' goes after
    cli.app.command("boom")(lambda: 1 / 0)
    plain = tb_inprocess("boom")
    assert plain.returncode == 1 and len(plain.stderr.strip().splitlines()) == 1, plain.stderr
    assert "internal error (ZeroDivisionError" in plain.stderr and "--debug" in plain.stderr
    assert "Traceback" not in plain.stderr
    (tmp_path / "cwd").mkdir()
    code = ("import sys; import tamperbench.cli as c; "
            "c.app.command('boom')(lambda: 1 / 0); sys.argv = ['tamperbench', *sys.argv[1:]]; c.main()")
    env = dict(os.environ)
    env.pop("TAMPERBENCH_DEBUG", None)
    debug = subprocess.run([sys.executable, "-c", code, "--debug", "boom"], capture_output=True, text=True, env=env)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "ZeroDivisionError" in debug.stderr
    env["TAMPERBENCH_DEBUG"] = "1"
    assert "Traceback" in subprocess.run([sys.executable, "-c", code, "boom"], capture_output=True, text=True,
                                         env=env).stderr
