"""``owmi summary`` (owmi/score/tables.py) on a real DuckDB run directory with hand-chosen records.

Why: the per-condition table is what a user reads first after a run (pairs complete, parse rates
with numerator and denominator, descriptive yes-rate, Track C rubric rate, JS, causal effect, the
impact-matching line). Its only other test runs the embedded model (e2e), so without this file
no fast test notices a wrong count or rate. Expected values are computed here in plain Python
from the records written (group, count, mean of the non-null values), never by the module's SQL.
"""

from __future__ import annotations

import io
import re
from statistics import mean

import pytest
from pydantic import BaseModel
from rich.console import Console

from tamperbench.errors import UserError
from tamperbench.owmi.protocol.records import CALIBRATION_TABLE, RUNS_TABLE, OwmiCalibration, OwmiRun, analysable
from tamperbench.owmi.score.tables import render
from tamperbench.store import RunStore
from tamperbench.store.run_store import trial_key


class _Spec(BaseModel):
    suite: str = "owmi"
    name: str = "summary bite"


class _Other(BaseModel):
    suite: str = "sleight"


BASE = dict(cell_id="c", model="m", model_revision="rev", dtype="float32", quantized=False, temperature=0.0,
            top_p=1.0, max_new_tokens=8, readout="generated", benchmark="b", domain="knowledge", item_provenance="{}",
            object_kind="resid_post", site="resid_post.1", layer=1, operator="add", dose=1.0, positions="task",
            when="prefill", seed=0, probe_family="detection", probe_text="p", prompt_text="t", prompt_ids=[1],
            intervened_positions=[], response="{}", finish_reason="stop")

# (track, scope, item, pair, condition, tier, parse_ok, detected, rubric_flag, js_mean, causal_effect)
SPEC = [
    ("B_delayed", "active", "i0", "p0", "intervention", None, True, True, None, 0.10, 0.50),
    ("B_delayed", "active", "i1", "p1", "intervention", None, False, None, None, 0.30, -0.10),
    ("B_delayed", "active", "i2", "p2", "intervention", None, True, True, None, 0.20, 0.30),
    ("B_delayed", "active", "i0", "p0", "sham", None, True, False, None, None, None),
    ("B_delayed", "active", "i1", "p1", "sham", None, True, True, None, None, None),
    ("B_delayed", "active", "i9", "p9", "sham", None, True, False, None, None, None),  # no intervention: unpaired
    ("B_delayed", "active", "i0", "p0", "observer", 1, True, True, None, None, None),
    ("B_delayed", "active", "i1", "p1", "observer", 1, True, False, None, None, None),
    ("B_delayed", "active", "i2", "p2", "observer", 1, True, False, None, None, None),
    ("B_delayed", "active", "i0", "p0", "observer", 3, True, False, None, None, None),
    ("C", "lifted", "i0", "c0", "intervention", None, True, None, True, 0.05, None),
    ("C", "lifted", "i1", "c1", "intervention", None, True, None, True, 0.07, None),
    ("C", "lifted", "i0", "c0", "sham", None, True, None, False, None, None),
    ("C", "lifted", "i1", "c1", "sham", None, False, None, None, None, None),
    ("C", "lifted", "i2", "c2", "sham", None, True, None, True, None, None),
]


def _records():
    out = []
    for n, (track, scope, item, pair, cond, tier, ok, det, rub, js, ce) in enumerate(SPEC):
        pf = "spontaneous" if track == "C" else "detection"
        out.append(OwmiRun(**{**BASE, "probe_family": pf}, key=trial_key([n]), pair_id=pair, item_id=item,
                           track=track, hook_scope=scope, condition=cond, observer_tier=tier, parse_ok=ok,
                           detected=det, rubric_flag=rub, js_mean=js, causal_effect=ce))
    # a record another tool wrote without its prompt text: counted in the table, flagged as unanalysable
    out.append(OwmiRun.model_construct(**{**BASE, "prompt_text": ""}, key=trial_key(["bad"]), pair_id="p2",
                                       item_id="i2", track="B_delayed", hook_scope="active", condition="sham",
                                       observer_tier=None, parse_ok=True, detected=True, rubric_flag=None,
                                       js_mean=None, causal_effect=None))
    return out


def _write(run, records, cal=(), spec=None):
    store = RunStore.open(run, spec or _Spec())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, list(records))
    if cal:
        store.ensure_table(CALIBRATION_TABLE, OwmiCalibration)
        store.write(CALIBRATION_TABLE, list(cal))
    store.close()


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return mean(xs) if xs else None


def _expected(records):
    """The table's rows grouped and averaged by hand (booleans read as 1/0, nulls skipped)."""
    iv = {r.pair_id for r in records if r.condition == "intervention"}
    groups: dict[tuple, list] = {}
    for r in records:
        groups.setdefault((r.track, r.hook_scope, r.condition, r.observer_tier or 0), []).append(r)
    out = []
    for k in sorted(groups):
        g = groups[k]
        out.append((*k, len(g), sum(r.pair_id in iv for r in g), sum(bool(r.parse_ok) for r in g),
                    _mean([None if r.detected is None else float(r.detected) for r in g]),
                    _mean([None if r.rubric_flag is None else float(r.rubric_flag) for r in g]),
                    _mean([r.js_mean for r in g]), _mean([r.causal_effect for r in g])))
    return out


def _console():
    return Console(file=io.StringIO(), width=400, record=True, color_system=None)


def _cells(text):
    """Each table line as its list of stripped cells (rich draws body cells with │, the header with ┃)."""
    return [[c.strip() for c in re.split("[│┃]", ln)[1:-1]] for ln in text.splitlines() if ln.startswith(("│", "┃"))]


CAL = OwmiCalibration(key="cal0", model="m", site="resid_post.1", operator="add", dose=1.0, seed=0, item_id="i0",
                      target_js=0.012345678, achieved_js=0.0123, eta=2.5, iterations=7, trace=[[1.0, 0.01]])
CAL_SHARED = OwmiCalibration(key="cal1", model="m", site="resid_post.1", operator="add", dose=1.0, seed=0,
                             item_id="i0", target_js=0.02, achieved_js=0.0201, eta=3.25, iterations=9,
                             trace=[[1.0, 0.01]], path="batched", system_prompt="You are [b]careful[/b].")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("summary") / "run"
    _write(path, _records(), [CAL, CAL_SHARED])
    return path


def test_rows_counts_and_rates_match_a_hand_count(run):
    rows = render(run, _console())
    exp = _expected(_records())
    assert [r[:7] for r in rows] == [e[:7] for e in exp]
    for got, want in zip(rows, exp):
        assert list(got[7:]) == pytest.approx(list(want[7:]), nan_ok=True), got[:4]
    # spot values by hand: B_delayed/active intervention: 3 runs, 3 paired, 2 parsed, yes-rate 2/2, JS 0.2, causal 0.7/3
    b_int = next(r for r in rows if r[:3] == ("B_delayed", "active", "intervention"))
    assert b_int[4:] == pytest.approx((3, 3, 2, 1.0, None, 0.2, 0.7 / 3))
    # shams: i0, i1 and the unanalysable i2 pair with an intervention, i9 does not; yes-rate 2/4
    b_sham = next(r for r in rows if r[:3] == ("B_delayed", "active", "sham"))
    assert b_sham[4:7] == (4, 3, 4) and b_sham[7] == pytest.approx(0.5)
    c_sham = next(r for r in rows if r[:3] == ("C", "lifted", "sham"))
    assert c_sham[4:7] == (3, 2, 2) and c_sham[8] == pytest.approx(0.5) and c_sham[7] is None
    tiers = [(r[3], r[4], r[7]) for r in rows if r[2] == "observer"]
    assert tiers == [(1, 3, pytest.approx(1 / 3)), (3, 1, 0.0)]
    assert [r[3] for r in rows if r[2] != "observer"] == [0, 0, 0, 0]


def test_printed_table_calibration_and_unanalysable_count(run):
    assert sum(not analysable(r.model_dump()) for r in _records()) == 1
    con = _console()
    render(run, con)
    text = con.export_text()
    assert f"OWMI {run}: runs per track x scope x condition (observer tier in brackets)" in " ".join(
        text.split())
    cells = _cells(text)
    assert cells[0] == ["track", "scope", "condition", "runs", "paired w/ intervention", "parsed", "yes-rate (descr.)",
                        "C rubric flag", "mean JS", "causal effect"]
    body = cells[1:]
    assert ["B_delayed", "active", "intervention", "3", "3", "2/3", "1.00", "-", "0.2000", "0.233"] in body
    assert ["B_delayed", "active", "observer [1]", "3", "3", "3/3", "0.33", "-", "-", "-"] in body
    assert ["B_delayed", "active", "observer [3]", "1", "1", "1/1", "0.00", "-", "-", "-"] in body
    assert ["B_delayed", "active", "sham", "4", "3", "4/4", "0.50", "-", "-", "-"] in body
    assert ["C", "lifted", "intervention", "2", "2", "2/2", "-", "1.00", "0.0600", "-"] in body
    assert ["C", "lifted", "sham", "3", "2", "2/3", "-", "0.50", "-", "-"] in body
    assert len(body) == 6
    # one line per context frame, each naming its frame and how E[D(eta)] was computed
    assert ("impact matching resid_post.1 add=1.0 (no system message (Track C frame); sequential E[D(eta)]): "
            "target mean JS 0.01235, achieved 0.01230 at norm 2.500 (7 evaluations)") in text
    assert ("impact matching resid_post.1 add=1.0 (introspection system prompt; batched E[D(eta)]): "
            "target mean JS 0.02000, achieved 0.02010 at norm 3.250 (9 evaluations)") in text
    assert "1 runs lack a field Appendix D requires and do not enter analysis" in text


def test_calibration_line_prints_hostile_text_as_typed(tmp_path):
    """A run directory may come from someone else: a site or path holding rich markup prints as the
    characters it is (markup off), neither restyled nor raising on an unbalanced closing tag."""
    hostile = CAL.model_copy(update={"site": "[bold]s[/bold]", "path": "[/x]"})
    _write(tmp_path / "run", _records(), [hostile])
    con = _console()
    render(tmp_path / "run", con)
    assert "impact matching [bold]s[/bold] add=1.0 (no system message (Track C frame); [/x] E[D(eta)])" in \
        " ".join(con.export_text().split())


def test_no_calibration_and_all_analysable_print_neither_line(tmp_path):
    recs = [r for r in _records() if analysable(r.model_dump())]
    _write(tmp_path / "run", recs)
    con = _console()
    rows = render(tmp_path / "run", con)
    assert len(rows) == 6
    text = con.export_text()
    assert "impact matching" not in text and "lack a field" not in text


def test_not_an_owmi_run_is_refused_naming_the_directory(tmp_path):
    _write(tmp_path / "other", _records()[:2], spec=_Other())
    with pytest.raises(UserError, match=re.escape(f"{tmp_path / 'other'}: not an OWMI run (no owmi_runs table)")):
        render(tmp_path / "other", _console())
    store = RunStore.open(tmp_path / "empty", _Spec())  # an OWMI spec, but no run was ever written
    store.close()
    with pytest.raises(UserError, match="not an OWMI run"):
        render(tmp_path / "empty", _console())


def test_summary_reads_a_run_whose_writer_lock_is_held(run):
    """A summary is a reader: it must not need (or take) the run's writer lock, which a running
    ``owmi run`` holds (here: this test holds the lock file's flock, as the writer process would)."""
    import fcntl
    import os

    fd = os.open(run / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert len(render(run, _console())) == 6
    finally:
        os.close(fd)
