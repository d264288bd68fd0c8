"""Issue 15, property tests (hypothesis): random bytes, random JSON and random table names through
``quote score``, spec loading and export, in-process. Only :class:`UserError` may come out; any other
exception is a traceback a user would have seen, and fails the test.

Few examples per property (the suite's time budget); each still reaches the real parsers, the real
DuckDB store and the real export.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tamperbench.errors import UserError
from tamperbench.export.tables import export_run
from tamperbench.quote.items import items_by_id
from tamperbench.quote.score_file import read_lines, score_lines
from tamperbench.spec_base import load_spec_file, read_spec_json
from tamperbench.store import Record, RunStore, trial_key
from tamperbench.suites import registered, runnable_suite

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STORE = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # DuckDB files
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                    max_leaves=12)
ITEM_IDS = sorted(items_by_id())


def only_user_errors(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except UserError as err:
        assert str(err).strip()  # a message naming the culprit (the CLI prints it on one line)
        return None


# -- quote score -------------------------------------------------------------------------------
@FAST
@given(st.binary(max_size=400))
def test_quote_score_random_bytes(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.jsonl"
        path.write_bytes(data)
        lines = only_user_errors(read_lines, path)
        if lines is not None:
            verdicts, problems, skipped = score_lines(lines)  # never raises: bad lines are problems
            assert len(verdicts) + skipped <= len([ln for ln in lines if ln.strip()])


@FAST
@given(st.lists(JSON | st.fixed_dictionaries({"item_id": st.sampled_from(ITEM_IDS) | st.text(max_size=6)},
                                             optional={"response": JSON | st.text(), "model": JSON, "arm": JSON}),
                max_size=4))
def test_quote_score_random_json(objs):
    lines = [json.dumps(o) for o in objs]
    verdicts, problems, skipped = score_lines(lines)
    for v in verdicts:
        json.dumps(v, ensure_ascii=False).encode("utf-8")  # what the CLI writes must be writable


# -- spec loading ------------------------------------------------------------------------------
RUNNABLE = sorted(n for n, s in registered().items() if s.runnable)


def load_like_run_command(path: Path) -> None:
    """What ``tamperbench run SPEC.json`` does before running anything."""
    raw = read_spec_json(path)
    suite = runnable_suite(raw.get("suite"), f"{path}: field 'suite'")
    load_spec_file(path, suite.spec_model())


@FAST
@given(st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode()))
def test_spec_loading_random_bytes_and_json(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.json"
        path.write_bytes(data)
        only_user_errors(load_like_run_command, path)


@FAST
@given(st.sampled_from(RUNNABLE), st.data())
def test_spec_loading_random_field_values(suite_name, data):
    fields = list(registered()[suite_name].spec_model().model_fields)
    spec = data.draw(st.dictionaries(st.sampled_from(fields), JSON, max_size=4))
    spec["suite"] = suite_name
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.json"
        path.write_text(json.dumps(spec))
        only_user_errors(load_like_run_command, path)


@pytest.fixture(scope="module")
def empty_run(tmp_path_factory) -> Path:
    """One real run for the module (its spec.json is overwritten by each example that needs it)."""
    run = tmp_path_factory.mktemp("hostile") / "run"
    with RunStore.open(run, _Spec()):
        pass
    return run


@STORE
@given(data=st.binary(max_size=120) | JSON.map(lambda v: json.dumps(v).encode()))
def test_stored_spec_json_random_bytes(empty_run, data):
    (empty_run / "spec.json").write_bytes(data)  # each example writes the whole file: none sees another's
    store = only_user_errors(RunStore.open_existing, empty_run, read_only=True)
    if store is not None:
        store.close()


# -- export ------------------------------------------------------------------------------------
class _Spec(Record.__base__):  # a plain pydantic model (Record's base), the spec of these runs
    suite: str = "hostile"


class _Row(Record):
    text: str


_READER = duckdb.connect()  # one in-memory reader of the exported files for every example (a connect is ~25 ms)
# Random text (refused: not a record table name) and names export accepts, so both paths are drawn.
TABLE_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,62}", fullmatch=True) | st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=40)


@STORE
@given(TABLE_NAMES, st.booleans(), st.sampled_from(["csv", "jsonl", "parquet"]))
@example("trials", False, "csv")  # exported and read back in each format, whatever the draws
@example("rows_2", True, "jsonl")
@example("x", True, "parquet")
def test_export_random_table_names(name, by_flag, fmt):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run = tmp / "run"
        with RunStore.open(run, _Spec()) as store:
            store.write(name, [_Row(key=trial_key({"i": i}), text=f"{name}'\"{i}") for i in range(2)])
        out = tmp / "out" / f"x.{fmt}"
        before = {p for p in tmp.rglob("*")}
        written = only_user_errors(export_run, run, fmt, out, name if by_flag else None)
        stray = {p for p in tmp.rglob("*")} - before
        assert all(out.parent in p.parents or p == out.parent for p in stray), stray
        if written is not None:
            assert [w[0] for w in written] == [name]
            n = _READER.execute(
                {"csv": "SELECT count(*) FROM read_csv(?)", "jsonl": "SELECT count(*) FROM read_json(?)",
                 "parquet": "SELECT count(*) FROM read_parquet(?)"}[fmt], [str(written[0][1])]).fetchone()[0]
            assert n == 2


@pytest.fixture(scope="module")
def one_row_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("hostile") / "run"
    with RunStore.open(run, _Spec()) as store:
        store.write("rows", [_Row(key="k", text="t")])
    return run


@STORE
@given(fname=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/"), min_size=1, max_size=30))
def test_export_random_out_names(one_row_run, fname):
    with tempfile.TemporaryDirectory() as tmp:  # one run (only read), a fresh output folder per example
        out = Path(tmp) / "out" / fname
        written = only_user_errors(export_run, one_row_run, "csv", out)
        if written is not None:
            assert written[0][1].is_file()
