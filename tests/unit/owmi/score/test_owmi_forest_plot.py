"""OWMI forest plots (issue 39): one figure per model, a row per detection cell with AUROC and margin over sham
and their intervals, the claim level as a mark, the known positive and its unadapted base on the same axes."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tamperbench.owmi.score.profile import score_runs
from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.owmi.score.site_forest import anchor_rows, forest_figures, forest_rows, short_label
from tamperbench.store import RunStore
from owmi_choice_rows import choice_detection_row


class _Spec(BaseModel):
    name: str = "forest"


def _records(model: str, site: str, items: int, gi: float, gs: float):
    out = []
    for i in range(items):
        pid = f"{model}-{site}-{i}"
        for cond, g in (("intervention", gi), ("sham", gs)):
            out.append(choice_detection_row(model=model, site=site, pair_id=pid, item=i, condition=cond, g=g))
    return out


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("forest")
    store = RunStore.open(tmp / "run", _Spec())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, _records("m1", "resid_post.3", 20, 0.9, 0.1) + _records("m1", "resid_post.5", 20, 0.1, 0.9)
                + _records("m2", "resid_post.3", 12, 0.9, 0.1))
    store.close()
    return score_runs([tmp / "run"], n_boot=200, dose_boot=0)


def test_one_figure_per_model_with_a_row_per_detection_cell(result):
    rows = forest_rows(result)
    assert len(rows) == 2
    m1 = next(v for k, v in rows.items() if "m1" in k)
    assert sorted(r["auroc"] for r in m1) == [0.0, 1.0]
    assert all(r["level"] is not None and r["verdict"] in ("exceeds_sham", "below_sham") for r in m1)
    figs = forest_figures(result)
    assert [f[0] for f in figs] == ["owmi_forest_0", "owmi_forest_1"]
    ax = figs[0][2].axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels and all("scale@0.5" in t and "\n" not in t for t in labels)
    marks = [t.get_text() for t in ax.texts]
    assert sorted(marks) == sorted(f"L{r['level']}" for r in m1)


def test_anchor_rows_share_the_axes_and_name_the_leakage_floor(result):
    pos = [{"role": "adapted (known positive)", "readout": "choice", "pairs": 100, "items": 100, "auroc": 0.99,
            "auroc_ci": [0.97, 1.0], "margin": 0.95, "margin_ci": [0.9, 0.99]},
           {"role": "unadapted base", "readout": "choice", "pairs": 100, "items": 100, "auroc": 0.6,
            "auroc_ci": [0.5, 0.7], "margin": 0.02, "margin_ci": [-0.05, 0.08]},
           {"role": "unadapted base", "readout": "generated", "pairs": 0, "items": 0, "auroc": None,
            "auroc_ci": [None, None], "margin": None, "margin_ci": [None, None]}]
    anchors = anchor_rows(pos)
    assert [a["label"] for a in anchors] == ["known positive · choice", "leakage floor (unadapted) · choice"]
    fig = forest_figures(result, pos)[0][2]
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[-2:] == ["known positive · choice", "leakage floor (unadapted) · choice"]


def test_short_label_fits_one_line():
    c = {"benchmark": "b", "site": "resid_post.12", "operator": "add", "dose": 16.0, "probe_family": "detection",
         "track": "B", "hook_scope": "lifted", "readout": "choice"}
    assert short_label(c) == "add@16 · resid_post.12 · B · lifted · choice"


def test_an_interval_that_excludes_its_estimate_is_drawn_from_its_ends(result):
    """A percentile bootstrap interval need not contain its point estimate (here 0.49 with [0.5, 0.7]; or a perfect
    detector's 1.0 with [1.0 - 1e-16, 1.0]): the row is drawn from the interval's ends, the estimate marked apart,
    where errorbar's half-widths refused it and the page failed to build."""
    pos = [{"role": "adapted (known positive)", "readout": "choice", "pairs": 100, "items": 50, "auroc": 1.0,
            "auroc_ci": [1.0 - 1e-16 + 2e-16, 1.0], "margin": 1.0, "margin_ci": [1.0, 1.0]},
           {"role": "unadapted base", "readout": "choice", "pairs": 94, "items": 50, "auroc": 0.49,
            "auroc_ci": [0.5, 0.7], "margin": -0.074, "margin_ci": [-0.13, -0.022]}]
    fig = forest_figures(result, pos)[0][2]
    ax = fig.axes[0]
    spans = sorted((round(float(seg[0][0]), 6), round(float(seg[1][0]), 6)) for c in ax.collections
                   for seg in c.get_segments() if seg[0][1] == seg[1][1])  # the horizontal interval lines
    assert (0.5, 0.7) in spans and (1.0, 1.0) in spans
    marks = sorted(round(float(x), 6) for line in ax.lines for x in line.get_xdata() if line.get_marker() == "D")
    assert marks == [0.49, 1.0]
