"""The OWMI section of the report site over synthesised OWMI records (real store, no model): the tables
carry the same numbers ``owmi score`` computes, and the three figures are written.

Synthetic because the site must show a known strong effect beside a null one; the records are the
engine's own schema (see tests/integration/owmi/score/test_owmi_score_synthetic.py).
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import numpy as np

from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.report.site import build_site
from tamperbench.store import RunStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "owmi" / "score"))
from test_owmi_score_synthetic import SynthSpec, _rows  # noqa: E402


class OwmiSpecLike(SynthSpec):
    suite: str = "owmi"


def test_owmi_section_tables_and_plots(tmp_path):
    rng = np.random.default_rng(7)
    run = tmp_path / "owmi"
    store = RunStore.open(run, OwmiSpecLike())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, _rows(rng, benchmark="strong", p_int=0.9, p_sham=0.1, n_items=12, doses=(4.0,))
                + _rows(rng, benchmark="null", p_int=0.3, p_sham=0.3, n_items=12, doses=(4.0,)))
    store.close()
    index, problems = build_site([run], tmp_path / "site")
    assert problems == []
    site = index.parent
    for stem in ("owmi_three_channels", "owmi_report_rates", "owmi_dprime_auroc"):
        assert (site / "plots" / f"{stem}.svg").stat().st_size > 1000
    det = list(csv.DictReader(io.StringIO((site / "tables" / "owmi-detection.csv").read_text())))
    strong = [r for r in det if r["cell"].startswith("strong") and "detection" in r["cell"]]
    null = [r for r in det if r["cell"].startswith("null") and "detection" in r["cell"]]
    assert len(strong) == len(null) == 1
    auroc_strong = float(strong[0]["AUROC"].split(" ")[0])
    auroc_null = float(null[0]["AUROC"].split(" ")[0])
    assert auroc_strong > 0.75 and abs(auroc_null - 0.5) < 0.2
    html = index.read_text()
    assert "Claim verdicts" in html and "Reportability profile" in html
