"""The Exact Words bar on a real short run: it counts the decoded tokens against the dry run's
bound and shows ``estimate.EtaTracker``'s remaining time (issue 14 item 3).

The bound is hand-counted (trials x budget) and compared with ``quote_plan``'s; the decoded count
is compared with the tokens the store says were decoded; the ETA text must be one that a tracker
over that bound gives for those tokens at some moment of the run (it reads the clock itself)."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from tamperbench.estimate import EtaTracker
from tamperbench.quote.plan import run_plan as quote_plan
from tamperbench.quote.runner import TABLE, QuoteContext, QuoteRunSpec, run_quote, work
from tamperbench.runs import WorkUnit

pytestmark = pytest.mark.model

BAR = re.compile(r"quote .*? ([\d,]+)/([\d,]+) tok (eta (?:-|<= .+?)) (?:[\d.]+|-) trials/s (\d+):(\d\d):(\d\d)")


def etas_between(total: int, tokens: int, lo: float, hi: float) -> set[str]:
    """Every text ``EtaTracker(total)`` gives for ``tokens`` decoded after ``lo`` to ``hi`` seconds."""
    return {EtaTracker(total).text(tokens, lo + (hi - lo) * i / 20_000) for i in range(20_001)}


def test_quote_bar_counts_down_the_dry_run_bound(embedded_backend, tmp_path):
    spec = QuoteRunSpec(item_ids=["S30"], max_new_tokens=6, device="cpu")
    planned = quote_plan(spec, tmp_path / "run", embedded_backend).row_tokens
    assert planned == 2 * 6  # 1 item x 2 arms x 6 tokens, each answer to its budget
    buf = io.StringIO()
    t0 = time.perf_counter()
    store = run_quote(spec, tmp_path / "run", backend=embedded_backend, console=Console(file=buf, width=300))
    wall = time.perf_counter() - t0
    decoded = sum(r["n_new_tokens"] for r in store.rows(TABLE))
    store.close()
    bars = BAR.findall(buf.getvalue())
    assert bars, buf.getvalue()
    done, total, eta, h, m, sec = bars[-1]  # the bar as the run left it
    assert int(total.replace(",", "")) == planned
    assert int(done.replace(",", "")) == decoded > 0
    # the tracker's clock at its last update: at most the run's wall time, at least the bar's elapsed
    # time when it finished (shown floored; the last update comes just before the last advance) less 1 s
    elapsed = int(h) * 3600 + int(m) * 60 + int(sec)
    assert eta in etas_between(planned, decoded, max(elapsed - 1.0, 0.0), wall), (eta, decoded, elapsed, wall)


def test_quote_work_reports_every_decoding_step(embedded_backend):
    """What the runner's bar is fed between commits: (tokens so far, seconds) after each step of
    the generation call (generate_chat's progress listener), ending at the tokens decoded."""
    from tamperbench.quote.runner import build_trials, data_sha256

    spec = QuoteRunSpec(item_ids=["S30"], max_new_tokens=5, device="cpu")
    spec = spec.model_copy(update={"data_sha256": data_sha256()})
    units = [WorkUnit(t.key, t) for t in build_trials(spec)]
    seen: list[dict] = []
    calls = list(work(QuoteContext(embedded_backend, spec), units, live=seen.append))
    decoded = sum(r.n_new_tokens for batch in calls for f in batch for r in f.records[TABLE])
    tokens = [s["tokens"] for s in seen]
    assert len(seen) >= 5  # one report per step; 5 steps at least (each answer <= 5 tokens, 2 rows)
    assert tokens == sorted(tokens) and tokens[-1] == decoded
    assert all(s["seconds"] >= 0 for s in seen)
    assert [s["seconds"] for s in seen] == sorted(s["seconds"] for s in seen)
