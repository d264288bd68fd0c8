"""Reconstruction through ``score_runs`` and every output: the JSON entry, Eq. 17 on the cell, the
detection cell's claim line, owmi_score.md, owmi_reconstruction.csv, the site table, ``owmi summary``.

Why: the margins are pinned in test_owmi_reconstruction.py; this file checks that they reach the
reader from the right cell. A detection cell and a reconstruction cell share model, site, operator,
dose, track and scope (the Eq. 17 pairing); a second reconstruction cell at another site must not
reach that claim. The model name is hostile markup: every output must show it inert. Expected
numbers are the hand-worked ones of test_owmi_reconstruction.py (observer margin -1/4 over 4 pairs,
accuracies 3/4 and 2/4); delta_det = hit rate - false-alarm rate = 7/8 - 1/8 by hand here.
Real DuckDB run directory; no model.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel
from rich.console import Console

from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.store import RunStore
from tamperbench.store.run_store import trial_key

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_owmi_reconstruction import records  # noqa: E402

MODEL = "m|<img src=x onerror=alert(1)>"
BASE = dict(cell_id="c", model=MODEL, model_revision="rev0123456789abc", dtype="float32", quantized=False,
            temperature=0.0, top_p=1.0, max_new_tokens=8, readout="generated", benchmark="b", domain="knowledge", item_provenance="{}",
            # B_delayed: a visible output, so the observer rows are the output-side bound (Track A: input-side, Section 3.4)
            object_kind="resid_post", layer=3, operator="add", dose=4.0, positions="task", when="prefill", seed=0,
            hook_scope="active", track="B_delayed", probe_text="p", prompt_text="t", prompt_ids=[1], intervened_positions=[],
            finish_reason="stop")


class _Spec(BaseModel):
    suite: str = "owmi"
    name: str = "reconstruction outputs"


def _runs() -> list[OwmiRun]:
    out = []
    for i in range(8):  # detection: hits 7/8 (d0 missed), false alarms 1/8 (d1)
        for cond in ("intervention", "sham"):
            yes = (cond == "intervention") != (i == (0 if cond == "intervention" else 1))
            out.append(OwmiRun(**BASE, key=trial_key(["det", i, cond]), pair_id=f"det{i}", item_id=f"d{i}",
                               site="resid_post.3", condition=cond, probe_family="detection", response="{}",
                               parse_ok=True, detected=yes, graded=(0.9 if yes else 0.1) - 0.05 * (i % 3)))
    for site in ("resid_post.3", "resid_post.5"):
        for r in records():
            out.append(OwmiRun(**BASE, key=trial_key([site, r["pair_id"], r["condition"], r["observer_tier"]]),
                               pair_id=f"{site}:{r['pair_id']}", item_id=r["item_id"], site=site,
                               condition=r["condition"], observer_tier=r["observer_tier"], concept=r["concept"],
                               probe_family="reconstruction", response=str(r["concept_report"]),
                               parse_ok=r["parse_ok"], concept_report=r["concept_report"]))
    return out


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    from tamperbench.owmi.score.profile import score_runs
    from tamperbench.owmi.score.render import save

    tmp = tmp_path_factory.mktemp("recon")
    store = RunStore.open(tmp / "run", _Spec())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, _runs())
    store.close()
    result = score_runs([tmp / "run"], n_boot=200, dose_boot=0)
    paths = save(result, tmp / "score")
    return tmp, result, paths


def _cell(result, family, site):
    return next(c for c in result["cells"] if c["cell"]["probe_family"] == family and c["cell"]["site"] == site)


def test_reconstruction_entry_eq17_and_the_matching_claim(scored):
    from tamperbench.owmi.score.claims import exceeds_sham

    _, result, _ = scored
    det = _cell(result, "detection", "resid_post.3")
    rec3, rec5 = _cell(result, "reconstruction", "resid_post.3"), _cell(result, "reconstruction", "resid_post.5")
    obs = rec3["reconstruction"]["margins"]["complete"]["observer"]
    assert (obs["pairs"], obs["estimate"]) == (4, -0.25)
    assert rec3["reconstruction"]["vs_sham"]["complete"]["margin"] == 0.25
    e = rec3["eq17"]
    beats = exceeds_sham(det["detection"], det["detection"]["complete"]["bh_reject"])
    assert e["delta_det"] == pytest.approx(0.75) and e["literal"] is True
    assert e["detection_exceeds_sham"] is beats and e["decision"] is (True if beats else False)
    assert "eq17" not in rec5  # no detection cell at resid_post.5: Eq. 17 not formed there
    line = ("reconstruction beats the observer bound (rule-scored, not human-validated): mu_obs = -0.2500 "
            f"[{obs['ci'][0]:+.4f}, {obs['ci'][1]:+.4f}] (n=4, max over observer tiers [1, 3])")
    assert line in det["claim"]["failed"]
    assert "claim" not in rec3  # claims are made on detection cells only
    assert result["reconstruction"]["human_validation"] is None
    assert result["reconstruction"]["paper"].startswith("paper (Appendix D.3): reconstruction not scored")


def test_markdown_csv_and_site_table(scored):
    from tamperbench.owmi.score.site import _tables

    _, result, paths = scored
    md = paths["markdown"].read_text()
    assert "## Reconstruction (rule-scored, not human-validated; Eq. 8 margins and Eq. 17)" in md
    assert "- paper (Appendix D.3): reconstruction not scored" in md and "- ours: rule-scored:" in md
    assert "<img" not in md and "&lt;img" in md and "m\\|" in md
    sec = md.split("## Reconstruction")[1].split("\n## ")[0]
    assert sec.count("resid\\_post.3") + sec.count("resid_post.3") >= 1
    assert "| 4 | 0.750 / 0.500 | +0.2500 [" in sec and "| +0.0000 / -0.2000 [" in sec
    assert "| concept\\_mismatch 1, no\\_concept\\_label 1 | yes / " in sec and "| n/a / n/a |" in sec
    rows = list(csv.DictReader(io.StringIO(paths["reconstruction_csv"].read_text())))
    assert [r["cell"].split(" · ")[1] for r in rows] == ["resid_post.3", "resid_post.5"]
    assert rows[0]["model"] == MODEL and rows[0]["scoring"] == "rule-scored, not human-validated"
    assert float(rows[0]["margin_sham"]) == 0.25 and rows[0]["margin_observer"].startswith("-0.2500 ")
    assert rows[0]["eq17_literal"] == "True" and rows[1]["eq17_literal"] == ""
    assert rows[0]["unscorable_pairs"] == "concept_mismatch 1, no_concept_label 1"
    t = next(t for t in _tables(result) if t.slug == "owmi-reconstruction")
    assert len(t.rows) == 2 and "reconstruction not scored" in t.note
    tmd = t.to_markdown()
    assert "<img" not in tmd and "0.750 / 0.500" in tmd and "concept_mismatch 1, no_concept_label 1" in tmd


def test_summary_prints_the_rule_scored_counts(scored):
    from tamperbench.owmi.score.tables import render

    tmp, _, _ = scored
    buf = io.StringIO()
    render(tmp / "run", Console(file=buf, width=250, color_system=None))
    out = buf.getvalue()
    # the table's title starts with the run's path, so rich wraps it to the table's width wherever the path
    # ends (pytest-xdist's paths are longer): read the title with its line breaks folded
    assert "reconstruction, rule-scored" in " ".join(out.split())
    # per condition over both reconstruction cells: runs, scored (parsed and labelled), correct
    want = {"intervention": (14, 8, 6), "sham": (14, 10, 6), "random_matched": (14, 10, 4),
            "observer [1]": (14, 10, 6), "observer [3]": (14, 8, 6)}
    table = out.split("rule-scored", 1)[1]
    got = {cells[2]: tuple(int(x) for x in cells[3:6]) for line in table.splitlines() if line.startswith("│")
           for cells in [[x.strip() for x in line.strip("│").split("│")]]}
    assert got == want
    assert "unscorable reconstruction pairs: concept_mismatch 2, no_concept_label 2" in out


@pytest.mark.parametrize("text,field", [
    ('{"raters": "three", "sample_size": 60, "threshold": 0.8, "agreement": 0.9}', "field 'raters' must be an integer"),
    ('{"raters": 2.5, "sample_size": 60, "threshold": 0.8, "agreement": 0.9}', "field 'raters' must be an integer"),
    ('{"raters": 3, "sample_size": 60, "threshold": 0.8}', "field 'agreement' must be a number"),
    ('{"raters": 3, "sample_size": 60, "threshold": 80, "agreement": 0.9}', "field 'threshold' must be in 0..1"),
    ('{"raters": true, "sample_size": 60, "threshold": 0.8, "agreement": 0.9}', "field 'raters' must be an integer"),
    # JSON's Infinity / NaN parse as floats; int(Infinity) used to raise OverflowError (a traceback)
    ('{"raters": Infinity, "sample_size": 60, "threshold": 0.8, "agreement": 0.9}', "field 'raters' must be an integer"),
    ('{"raters": 3, "sample_size": NaN, "threshold": 0.8, "agreement": 0.9}', "field 'sample_size' must be an integer"),
    ('{"raters": 3, "sample_size": 60, "threshold": 0.8, "agreement": NaN}', "field 'agreement' must be a number"),
    # a file past the 64 KiB bound is refused before it is parsed
    ('{"raters": 3, "sample_size": 60, "threshold": 0.8, "agreement": 0.9, "note": "' + "x" * 70_000 + '"}',
     "larger than 65,536 bytes"),
    ("[1, 2]", "expected a JSON object"), ("{not json", "not a readable JSON file (JSONDecodeError)")])
def test_cli_bad_validation_file_is_one_error_line(scored, tb_inprocess, text, field):
    tmp, _, _ = scored
    bad = tmp / "bad.json"
    bad.write_text(text)
    res = tb_inprocess("owmi", "score", tmp / "run", "--boot", "5", "--dose-boot", "0", "--out", tmp / "s_bad",
                       "--recon-validation", bad)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines == [f"error: --recon-validation: {bad}: {field}"], res.stderr
    assert not (tmp / "s_bad").exists()


def test_cli_validation_is_recorded_and_named(scored, tb_inprocess):
    import json

    tmp, _, _ = scored
    ok = tmp / "valid.json"
    ok.write_text('{"raters": 3, "sample_size": 60, "threshold": 0.8, "agreement": 0.85, "note": "<b>pre-registered</b>"}')
    res = tb_inprocess("owmi", "score", tmp / "run", "--boot", "20", "--dose-boot", "0", "--out", tmp / "s_ok",
                       "--recon-validation", ok)
    assert res.returncode == 0, res.stderr
    md = (tmp / "s_ok" / "owmi_score.md").read_text()
    assert "## Reconstruction (rule-scored, human-validated; Eq. 8 margins and Eq. 17)" in md
    assert "human validation (D.3): 3 raters, 60 items, agreement 0.85 vs threshold 0.8 fixed in advance" in md
    got = json.loads((tmp / "s_ok" / "owmi_score.json").read_text())["reconstruction"]["human_validation"]
    assert got == {"raters": 3, "sample_size": 60, "threshold": 0.8, "agreement": 0.85, "note": "<b>pre-registered</b>",
                   "file": str(ok)}
    det = next(c for c in json.loads((tmp / "s_ok" / "owmi_score.json").read_text())["cells"]
               if c["cell"]["probe_family"] == "detection")
    # validated, but the rule-scored observer margin does not beat the bound: Eq. 17's second half, listed as failed
    assert any(f.startswith("reconstruction beats the observer bound (rule-scored, human-validated): mu_obs = -0.2500")
               for f in det["claim"]["failed"])
    assert any(h.startswith("reconstruction scoring human-validated (D.3: multiple raters, threshold fixed in "
                            "advance): 3 raters, 60 items") for h in det["claim"]["held"])
