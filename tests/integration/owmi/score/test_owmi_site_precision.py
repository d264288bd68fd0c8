"""The report site says why it shows no all-models pool when the runs' precisions differ, and names
each model identity (name, revision, dtype, quantized) on its own rows.

Why: the site's "d' and AUROC per model" figure plots every pool; with a float32 and a bfloat16
model there is none over both (Appendix D.4), and a reader looking for one must be told why, not
left to guess that a row went missing. Real store and site builder; records from the profile test.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.report.site import build_site
from tamperbench.store import RunStore

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "unit" / "owmi" / "score"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
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


def test_site_names_each_model_identity_and_escapes_the_name(tmp_path):
    """One hostile model name at float32 and bfloat16: the site's tables carry one row per identity with
    that identity's own numbers, and the model-level claims one row each, every name escaped.

    The detection table once looked its cell up by model name and cell label, so the float32 row showed
    the bfloat16 cell's d' (the bfloat16 cells sort first). Expected d' values come from
    ``detection_entry`` on the rows filtered here by hand (one identity, one site)."""
    import csv
    import io

    from tamperbench.owmi.score.score import detection_entry, load_runs

    name = "m|<b>x</b>"
    base = [r.model_copy(update={"model": name}) for r in _records()[:-2] if r.model == "m"]
    bf16 = [r.model_copy(update={"key": r.key + "-bf16", "dtype": "bfloat16", "graded": round(2 * r.graded, 6),
                                 "detected": (not r.detected) if r.condition == "sham" else r.detected}) for r in base]
    store = RunStore.open(tmp_path / "run", OwmiSpecLike())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, base + bf16)
    store.close()
    index, problems = build_site([tmp_path / "run"], tmp_path / "site")
    assert problems == []
    html = index.read_text()
    assert "<b>x</b>" not in html
    labels = {"float32": f"{name} @ revmmmmmmmmm float32", "bfloat16": f"{name} @ revmmmmmmmmm bfloat16"}
    for label in labels.values():
        assert label.replace("<", "&lt;").replace(">", "&gt;") in html
    rows, _, _ = load_runs([tmp_path / "run"])
    tables = index.parent / "tables"
    det = list(csv.DictReader(io.StringIO((tables / "owmi-detection.csv").read_text())))
    assert len(det) == 4
    for dtype, label in labels.items():
        for site in ("resid_post.3", "resid_post.5"):
            (row,) = [r for r in det if r["model"] == label and f" {site} " in r["cell"]]
            own = [r for r in rows if r["dtype"] == dtype and r["site"] == site and r["probe_family"] == "detection"]
            assert float(row["d'"].split(" ")[0]) == pytest.approx(detection_entry(own, 1, 0)["complete"]["dprime"],
                                                                    abs=5e-4)
    claims = list(csv.DictReader(io.StringIO((tables / "owmi-model-claims.csv").read_text())))
    assert [r["model"] for r in claims] == [labels["bfloat16"], labels["float32"]]
    assert {r["temporal decay"] for r in claims} == {"temporal decay (Eq. 19, D.5): not estimable in 2 of 2 cells"}
