"""The report site over a real (tiny) Sleight of Word run and a real Exact Words run of the embedded
model: tables computed from the records, per-token pieces decoded with the run's own tokenizer, the
viewer's data split per question."""

from __future__ import annotations

import json
import re

import pytest

from tamperbench.quote.runner import QuoteRunSpec, run_quote
from tamperbench.report.site import build_site
from tamperbench.sleight.spec import build_spec
from tamperbench.sleight.runner import run as run_sleight
from tamperbench.sleight.summary import summarize
from tamperbench.store import RunStore

pytestmark = pytest.mark.model


def test_site_from_real_runs(tmp_path, embedded_backend):
    spec = build_spec(model="embedded", preset="quick", questions=2, words=2, max_new_tokens=24, device="cpu")
    run_sleight(spec, tmp_path / "sleight", backend=embedded_backend)
    qspec = QuoteRunSpec(model="embedded", arms=["plain"], max_new_tokens=16, device="cpu", item_ids=["S01", "S02"])
    run_quote(qspec, tmp_path / "quote", backend=embedded_backend).close()
    index, problems = build_site([tmp_path / "sleight", tmp_path / "quote"], tmp_path / "site")
    assert problems == []
    site = index.parent
    with RunStore.open_existing(tmp_path / "sleight", read_only=True) as store:
        summ = summarize(store)
    md = (site / "tables" / "sleight-table1.md").read_text()
    est = summ[0]["delta_surprisal"]
    assert f"{est['mean']:+.2f}" in md  # the leaderboard shows the summary computed from the records
    chunks = sorted((site / "data" / "sleight-0").glob("q*.js"))
    assert len(chunks) == 2  # one data script per question
    payload = json.loads(re.match(r'tbLoad\("q0",(.*)\);\s*$', chunks[0].read_text(), re.S).group(1))
    trial = payload["trials"][0]
    assert "".join(trial["pieces"]).strip() and len(trial["pieces"]) == len(trial["surprisal"])
    assert (site / "tables" / "quote-faithful.csv").read_text().count("\n") == 2
    for stem in ("sleight_deltas", "sleight_swap_aligned", "quote_taxonomy"):
        assert (site / "plots" / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
