"""Issue 29, table-driven like test_hostile_inputs.py (issue 15), whose helpers and checks it reuses:
each case prepares its inputs under ``tmp/inputs``, runs ``tamperbench ...`` in-process with
``tmp/cwd`` as the working directory, and checks the exit status, the one ``error:`` line naming the
culprit, no traceback, and no file appearing outside the declared output paths. ``check`` adds the
case's own proof (a link's target unchanged, a duplicate run counted once, ...).

Runs are synthetic (sleight/synthetic.py, and a three-trial quote run below) written through the real
store; no model is loaded.
"""

from __future__ import annotations

import json

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from test_hostile_inputs import _synthetic_run_templates, Case, assert_allowed, assert_outcome, listing, run_dir  # noqa: F401 (fixture)

from tamperbench.quote.runner import QuoteRunSpec, QuoteTrial
from tamperbench.sleight.synthetic import synthetic_provenance
from tamperbench.store import RunStore, trial_key

TARGET = b"precious bytes outside the run\n"


def quote_run(inputs: Path, name: str = "qrun", n: int = 3) -> Path:
    path = inputs / name
    with RunStore.open(path, QuoteRunSpec(model="synthetic-quote-model"), new=True) as store:
        store.ensure_table("quote_trials", QuoteTrial)
        pid = store.put_provenance(synthetic_provenance("synthetic-quote-model"))
        store.write("quote_trials", [QuoteTrial(
            key=trial_key({"i": i}), provenance_id=pid, model="synthetic-quote-model", preset="standard",
            item_id=f"item{i}", doc_id="memo", arm="plain" if i % 2 == 0 else "strict", repeat=0, dirty=False,
            gold="The gold sentence.", instruction="Quote it.", prompt_text="p", n_prompt_tokens=3,
            response=["The gold sentence.", "=HYPERLINK(\"x\")", "+1 +cmd|' /C calc'!A0"][i % 3], n_new_tokens=5,
            finish_reason="eos", temperature=0.0, seed=0, sample_index=i, max_new_tokens=64, batch_size=1,
            answer="a", category=["faithful", "rewritten", "truncated"][i % 3], evidence={}) for i in range(n)])
    return path


def _target(inputs: Path) -> Path:
    t = inputs.parent / "outside" / "target.txt"
    t.parent.mkdir(exist_ok=True)
    t.write_bytes(TARGET)
    return t


def _linked(run: Path, name: str) -> Path:
    """``run/name`` made a symbolic link to a file outside the run."""
    target = _target(run.parent)
    if (run / name).exists():
        (run / name).unlink()
    (run / name).symlink_to(target)
    return run


def _target_intact(tmp: Path, proc) -> None:
    assert (tmp / "outside" / "target.txt").read_bytes() == TARGET


def _truncated(inputs: Path, keep: float) -> Path:
    """A run whose database was cut off after ``keep`` of its bytes (a copy interrupted, a full disk)."""
    run = run_dir(inputs)
    db = run / "records.duckdb"
    db.write_bytes(db.read_bytes()[: int(db.stat().st_size * keep)])
    return run


def _responses(tmp: Path, name: str = "o.csv") -> list[str]:
    import csv

    with open(tmp / "cwd" / name, newline="", encoding="utf-8") as fh:
        return sorted(r["response"] for r in csv.DictReader(fh))


def _defused(tmp: Path, proc) -> None:
    assert _responses(tmp) == sorted(["The gold sentence.", "'=HYPERLINK(\"x\")", "'+1 +cmd|' /C calc'!A0"])


def _raw(tmp: Path, proc) -> None:
    assert _responses(tmp) == sorted(["The gold sentence.", "=HYPERLINK(\"x\")", "+1 +cmd|' /C calc'!A0"])


CASES = [
    # 29.1 a hostile run directory: links in it are refused in one line, their targets untouched
    Case("quote-table-json-is-a-link", lambda i: (["quote", "table", _linked(quote_run(i), "quote_table.json")], []),
         needles=("quote_table.json", "symbolic link"), check=_target_intact),
    Case("sleight-table-md-is-a-link", lambda i: (["sleight", "table", _linked(run_dir(i), "tables.md")], []),
         needles=("tables.md", "symbolic link"), check=_target_intact),
    Case("quote-run-lock-is-a-link", lambda i: (["quote", "run", "--out", _linked(quote_run(i), ".lock"),
                                                 "--device", "cpu"], []),
         needles=(".lock", "symbolic link"), check=_target_intact),
    Case("sleight-run-spec-is-a-link", lambda i: (["sleight", "run", "--out", _linked(run_dir(i), "spec.json"),
                                                   "--questions", "1", "--words", "1", "--device", "cpu"], []),
         needles=("spec.json", "symbolic link"), check=_target_intact),
    # 29.9 CSV formula injection: defused by OWASP's rule unless --raw
    Case("export-csv-formula-cells", lambda i: (["export", quote_run(i), "--format", "csv", "--out", "o.csv"], ["o.csv"]),
         status=0, check=_defused),
    Case("export-csv-raw", lambda i: (["export", quote_run(i), "--format", "csv", "--raw", "--out", "o.csv"], ["o.csv"]),
         status=0, check=_raw),
    Case("export-raw-needs-csv", lambda i: (["export", quote_run(i), "--raw", "--out", "o.parquet"], []),
         needles=("--raw", "csv")),
    # 29.10 a truncated database is damaged, not "no schema version" (30%) nor a bug (50%)
    Case("export-truncated-database", lambda i: (["export", _truncated(i, 0.3), "--out", "o.csv"], []),
         needles=("records.duckdb", "damaged")),
    Case("sleight-table-truncated-database", lambda i: (["sleight", "table", _truncated(i, 0.5)], []),
         needles=("records.duckdb", "damaged")),
    Case("export-half-database", lambda i: (["export", _truncated(i, 0.5), "--format", "csv", "--out", "o.csv"], []),
         needles=("records.duckdb", "damaged")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_round2(case: Case, tmp_path: Path, tb_inprocess):
    (tmp_path / "inputs").mkdir()
    (tmp_path / "cwd").mkdir()
    argv, outs = case.prepare(tmp_path / "inputs")
    before = listing(tmp_path)
    proc = tb_inprocess(*argv, cwd=tmp_path / "cwd")
    assert_outcome(proc, case)
    assert_allowed(tmp_path, before, outs)
    if case.check is not None:
        case.check(tmp_path, proc)


def test_lock_link_is_refused_by_the_store_and_its_target_kept(tmp_path):
    """The store itself (every suite's writer) refuses a ``.lock`` link: it used to truncate the target."""
    from tamperbench.errors import UserError

    (tmp_path / "in").mkdir()
    run = _linked(quote_run(tmp_path / "in"), ".lock")
    with pytest.raises(UserError, match="symbolic link"):
        RunStore.open(run, QuoteRunSpec(model="synthetic-quote-model"))
    assert (tmp_path / "outside" / "target.txt").read_bytes() == TARGET


def test_report_rebuild_drops_pages_of_runs_no_longer_in_it(tmp_path, tb_inprocess):
    a = run_dir(tmp_path, "a", seed=1, model="alpha-model", questions=1, words=2)
    b = run_dir(tmp_path, "b", seed=2, model="beta-model", questions=1, words=2)
    assert tb_inprocess("report", a, b, "--out", tmp_path / "rep").returncode == 0
    two = {p.name for p in (tmp_path / "rep").rglob("*.html")}
    assert tb_inprocess("report", a, "--out", tmp_path / "rep").returncode == 0
    one = {p.name for p in (tmp_path / "rep").rglob("*.html")}
    assert one < two and not any("beta" in (p.read_text()) for p in (tmp_path / "rep").rglob("*.html"))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".rep")] == []  # no temporary folder left


def test_report_never_replaces_a_folder_that_is_not_a_site(tmp_path, tb_inprocess):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("mine")
    proc = tb_inprocess("report", run_dir(tmp_path), "--out", tmp_path / "mine")
    assert proc.returncode == 2 and "not a tamperbench report folder" in proc.stderr
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "mine"


def test_full_disk_names_the_file_and_keeps_the_old_one(tmp_path):
    """RLIMIT_FSIZE in a real subprocess stands for a full disk: writes past 2 KiB fail with EFBIG."""
    run = quote_run(tmp_path)
    (run / "quote_table.json").write_text("OLD\n")

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    # no bytecode written under the limit: Python 3.11 writes a .pyc without checking for a short write
    # (python/cpython#126606, fixed in later releases), so a module first imported here would leave a
    # cut-off .pyc (2 KiB of it) that breaks every later import of that module ("marshal data too short")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("TAMPERBENCH_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "tamperbench.cli", "quote", "table", str(run)], capture_output=True,
                          text=True, env=env, preexec_fn=small_disk, timeout=300)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "quote_table.json" in lines[0] and "File too large" in lines[0], lines[0]
    assert (run / "quote_table.json").read_text() == "OLD\n"
    assert sorted(p.name for p in run.iterdir() if p.name.endswith(".tmp")) == []


def test_site_csv_downloads_use_the_same_rule():
    """The report's table downloads (LeaderTable.to_csv) and export share csvsafe.csv_cell."""
    import csv
    import io

    from tamperbench.report.site.tables import LeaderTable

    t = LeaderTable(slug="t", title="T", columns=["v"])
    cells = ["+1 +cmd|' /C calc'!A0", "\t=1+2", "-inf =cmd|x", "@SUM(A1)", "\r=1", "-0.25", "+3e-4", "-12%", "ok"]
    for c in cells:
        t.add(c)
    got = [r[0] for r in list(csv.reader(io.StringIO(t.to_csv(), newline="")))[1:]]
    assert got == ["'+1 +cmd|' /C calc'!A0", "'\t=1+2", "'-inf =cmd|x", "'@SUM(A1)", "'\r=1", "-0.25", "+3e-4", "-12%", "ok"]


# 29.7 the same run given twice, through a link, or copied: counted once
def _site_tables(site: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((site / "tables").glob("*.csv"))}


def test_report_counts_a_run_given_twice_or_linked_or_copied_once(tmp_path, tb_inprocess):
    run = run_dir(tmp_path, "R", questions=2, words=2)
    (tmp_path / "LINK").symlink_to(run)
    copy = run_dir(tmp_path, "COPY", questions=2, words=2)
    assert tb_inprocess("report", run, "--out", tmp_path / "one").returncode == 0
    once = _site_tables(tmp_path / "one")
    assert once and any(",4," in t for t in once.values())  # n = 4 trials (2 questions x 2 words), not 8
    for i, others in enumerate([[run], [tmp_path / "LINK"], [copy]]):
        proc = tb_inprocess("report", run, *others, "--out", tmp_path / f"site{i}")
        assert proc.returncode == 0, proc.stderr
        assert _site_tables(tmp_path / f"site{i}") == once  # same n, same intervals
        assert "counted once" in proc.stderr and proc.stderr.count("warning:") == 1, proc.stderr


def _owmi_run(path: Path) -> Path:
    from pydantic import BaseModel

    from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun

    class Spec(BaseModel):
        suite: str = "owmi"
        name: str = "dup"

    base = dict(cell_id="c", model="m", model_revision="r", dtype="float32", quantized=False, temperature=0.0,
                top_p=1.0, max_new_tokens=8, benchmark="b", domain="knowledge", item_provenance="{}",
                object_kind="resid_post", site="resid_post.1", layer=1, operator="add", dose=8.0, positions="task",
                when="prefill", seed=0, probe_family="detection", probe_text="p", prompt_text="t", prompt_ids=[1],
                intervened_positions=[], response="{}", finish_reason="stop", track="A", hook_scope="active",
                readout="generated")
    recs = [OwmiRun(**base, key=trial_key([p, cond]), pair_id=f"p{p}", item_id=f"i{p}", condition=cond,
                    observer_tier=None, parse_ok=True, detected=det, graded=float(det))
            for p in range(12) for cond, det in (("intervention", p % 2 == 0), ("sham", p % 5 == 0))]
    with RunStore.open(path, Spec()) as store:
        store.ensure_table(RUNS_TABLE, OwmiRun)
        store.write(RUNS_TABLE, recs)
    return path


def test_owmi_score_counts_a_run_given_twice_once(tmp_path, tb_inprocess):
    run = _owmi_run(tmp_path / "R")
    (tmp_path / "LINK").symlink_to(run)
    outs = []
    for i, runs in enumerate([[run], [run, run], [run, tmp_path / "LINK"]]):
        proc = tb_inprocess("owmi", "score", *runs, "--boot", "50", "--dose-boot", "0", "--out", tmp_path / f"s{i}")
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.count("note:") == (0 if i == 0 else 1), proc.stderr
        outs.append((tmp_path / f"s{i}" / "owmi_detection.csv").read_text())
    assert outs[0] == outs[1] == outs[2] and "12" in outs[0]  # 12 pairs, not 24


def test_owmi_score_keeps_two_read_outs_that_share_only_their_calibration(tmp_path, tb_inprocess):
    """A `choice` run and a `constrained` run of one spec hold the same impact-matching calibration records
    (computed from the spec, not from how answers are read) and different trial records: both are scored.
    A real copy (the same trial records) is still counted once."""
    import shutil

    from pydantic import BaseModel

    from tamperbench.owmi.protocol.records import CALIBRATION_TABLE, RUNS_TABLE

    class Cal(BaseModel):
        key: str
        eta: float

    def with_calibration(path: Path, readout: str) -> Path:
        run = _owmi_run(path)
        with RunStore.open_existing(run) as store:
            rows = store.rows(RUNS_TABLE)
            store.con.execute(f"DELETE FROM {RUNS_TABLE}")
            from tamperbench.owmi.protocol.records import OwmiRun

            store.write(RUNS_TABLE, [OwmiRun(**{**r, "readout": readout, "key": trial_key([r["key"], readout])})
                                     for r in rows])
            store.ensure_table(CALIBRATION_TABLE, Cal)
            store.write(CALIBRATION_TABLE, [Cal(key="cell-c", eta=1.5)])
        return run

    a, b = with_calibration(tmp_path / "A", "generated"), with_calibration(tmp_path / "B", "constrained")
    proc = tb_inprocess("owmi", "score", a, b, "--boot", "50", "--dose-boot", "0", "--out", tmp_path / "s")
    assert proc.returncode == 0 and "note:" not in proc.stderr, proc.stderr
    scored = json.loads((tmp_path / "s" / "owmi_score.json").read_text())
    assert scored["runs"] == [str(a), str(b)] and scored["readouts"] == ["constrained", "generated"]
    assert scored["n_rows"] == 2 * 24  # both runs' records, each read-out its own cells
    detection = (tmp_path / "s" / "owmi_detection.csv").read_text()
    shutil.copytree(b, tmp_path / "COPY")
    proc = tb_inprocess("owmi", "score", a, b, tmp_path / "COPY", "--boot", "50", "--dose-boot", "0",
                        "--out", tmp_path / "s2")
    assert proc.returncode == 0 and proc.stderr.count("note:") == 1 and "COPY" in proc.stderr, proc.stderr
    assert (tmp_path / "s2" / "owmi_detection.csv").read_text() == detection


def test_sleight_table_refuses_a_run_twice_or_a_copy(tmp_path, tb_inprocess):
    run = run_dir(tmp_path, "R")
    (tmp_path / "LINK").symlink_to(run)
    proc = tb_inprocess("sleight", "table", run, tmp_path / "LINK", "--out", tmp_path / "o")
    assert proc.returncode == 2 and "the same run is given twice" in proc.stderr
    proc = tb_inprocess("sleight", "table", run, run_dir(tmp_path, "COPY"), "--out", tmp_path / "o")
    assert proc.returncode == 2 and "is in both" in proc.stderr


# 29.8 numbers without bounds: one line naming the field, exit 2, no run directory left behind
BIG = "1" + "0" * 400  # 10**400 as a JSON integer


def _spec(inputs: Path, text: str) -> Path:
    return _file_text(inputs / "spec.json", text)


def _file_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


UNBOUNDED = [
    ("temperature-infinity", '{"suite": "quote", "temperature": Infinity, "repeats": 2}', "temperature"),
    ("temperature-nan", '{"suite": "quote", "temperature": NaN}', "temperature"),
    ("seed-2-63", '{"suite": "quote", "seed": 9223372036854775808}', "seed"),
    ("seed-2-70", '{"suite": "quote", "seed": 1180591620717411303424, "temperature": 0.7, "repeats": 2}', "seed"),
    ("max-new-tokens-10-400", '{"suite": "quote", "max_new_tokens": ' + BIG + '}', "max_new_tokens"),
    ("repeats-ten-million", '{"suite": "quote", "repeats": 10000000, "temperature": 1.0}', "repeats"),
    ("batch-size-huge", '{"suite": "quote", "batch_size": 1099511627776}', "batch_size"),
]
CASES_8 = [Case(f"run-spec-{name}", lambda i, t=text: (["run", _spec(i, t), "--out", "RUN"], []), needles=("spec.json", field))
           for name, text, field in UNBOUNDED]
CASES_8 += [
    Case("quote-run-flag-seed-2-70", lambda i: (["quote", "run", "--out", "RUN", "--seed", str(2**70)], []),
         needles=("--seed",)),
    Case("quote-run-flag-temperature-inf", lambda i: (["quote", "run", "--out", "RUN", "--temperature", "inf",
                                                       "--repeats", "2"], []), needles=("--temperature",)),
    Case("sleight-run-flag-max-new-tokens-10-400", lambda i: (["sleight", "run", "--out", "RUN", "--max-new-tokens", BIG],
                                                              []), needles=("--max-new-tokens",)),
    Case("run-spec-file-over-8-mib", lambda i: (["run", _spec(i, '{"suite": "quote", "model": "' + "x" * (9 << 20) + '"}'),
                                                 "--out", "RUN"], []), needles=("spec.json", "MiB")),
]


@pytest.mark.parametrize("case", CASES_8, ids=[c.id for c in CASES_8])
def test_unbounded_numbers_refused(case: Case, tmp_path: Path, tb_inprocess):
    test_hostile_input_round2(case, tmp_path, tb_inprocess)
    assert not (tmp_path / "cwd" / "RUN").exists()  # nothing created


@pytest.mark.parametrize("name, text, field", UNBOUNDED, ids=[u[0] for u in UNBOUNDED])
def test_spec_models_bound_every_number(tmp_path, name, text, field):
    """The same spec files at the model level (what made the CLI cases red: these validated before)."""
    from tamperbench.errors import UserError
    from tamperbench.spec_base import load_spec_file

    with pytest.raises(UserError, match=field):
        load_spec_file(_spec(tmp_path, text), QuoteRunSpec)


def _sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk (a sparse file): the cap must refuse it unread."""
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


CASES_CAPS = [
    Case("quote-score-responses-over-cap", lambda i: (["quote", "score", _sparse(i / "r.jsonl", (256 << 20) + 1)], []),
         needles=("r.jsonl", "over 256 MiB")),
    Case("sweep-file-over-cap", lambda i: (["sweep", _sparse(i / "s.json", (8 << 20) + 1), "--out", "SW"], []),
         needles=("s.json", "over 8 MiB")),
    Case("report-run-spec-over-cap", lambda i: (["report", _oversized_spec(i), "--out", "rep"], []),
         needles=("spec.json", "8 MiB")),
]


def _oversized_spec(inputs: Path) -> Path:
    run = run_dir(inputs)
    _sparse(run / "spec.json", (8 << 20) + 1)
    return run


@pytest.mark.parametrize("case", CASES_CAPS, ids=[c.id for c in CASES_CAPS])
def test_read_files_have_a_size_cap(case: Case, tmp_path: Path, tb_inprocess):
    test_hostile_input_round2(case, tmp_path, tb_inprocess)


def test_owmi_score_never_follows_a_score_link_out_of_the_run(tmp_path, tb_inprocess):
    run = _owmi_run(tmp_path / "R")
    (tmp_path / "elsewhere").mkdir()
    (run / "score").symlink_to(tmp_path / "elsewhere")
    proc = tb_inprocess("owmi", "score", run, "--boot", "20", "--dose-boot", "0")
    assert proc.returncode == 2 and "score" in proc.stderr and "symbolic link" in proc.stderr, proc.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []
