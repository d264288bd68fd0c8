"""The report site says why it shows no all-models pool when the runs' precisions differ.

Why: the site's "d' and AUROC per model" figure plots every pool; with a float32 and a bfloat16
model there is none over both (Appendix D.4), and a reader looking for one must be told why, not
left to guess that a row went missing. Real store and site builder; records from the profile test.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tamperbench.owmi.records import RUNS_TABLE, OwmiRun
from tamperbench.report.site import build_site
from tamperbench.store import RunStore

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "owmi_analysis"))
from test_owmi_profile_bite import _records  # noqa: E402
from test_owmi_score_synthetic import SynthSpec  # noqa: E402


class OwmiSpecLike(SynthSpec):
    suite: str = "owmi"


def test_site_notes_why_no_pool_spans_two_dtypes(tmp_path):
    recs = [r.model_copy(update={"dtype": "bfloat16"}) if r.model == "m2" else r for r in _records()[:-2]]
    html = {}
    for name, rs in (("mixed", recs), ("same", _records()[:-2])):
        store = RunStore.open(tmp_path / name, OwmiSpecLike())
        store.ensure_table(RUNS_TABLE, OwmiRun)
        store.write(RUNS_TABLE, rs)
        store.close()
        index, problems = build_site([tmp_path / name], tmp_path / f"site-{name}")
        assert problems == []
        html[name] = index.read_text()
    assert "no all-models pool spans every run: runs at 2 precisions" in html["mixed"]
    assert "bfloat16, full precision: 1 model revision; float32, full precision: 1 model revision" in html["mixed"]
    assert "no all-models pool spans every run" not in html["same"]  # one precision: the pool exists, no note
