"""Temporal-decay contrasts (OWMI Eq. 19) and their D.5 claim rule, on synthesised run rows.

Why synthetic rows: the rule must be checked against *known* track margins (a real margin at
Track A, none at B and C; equal tracks; a missing track), which only synthesised records give.
Expected values come from scipy (probit), scikit-learn (``roc_auc_score``) and a bootstrap drawn
here by hand with numpy, never from the module under test. Pure: no model, no files.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from tamperbench.errors import UserError
from tamperbench.owmi.score.decay import TRACK_PATHS, decay_contrasts, decay_verdict, track_contrast, track_rows

ROOT = Path(__file__).resolve().parents[4]


def rec(track, item, seed, cond, det, graded=None, *, parse_ok=True, scope="active", model="m"):
    """One analysable-row dict as ``load_runs`` returns it (only the fields the analysis reads)."""
    pid = f"{track}-{item}-{seed}-{scope}"
    c = track == "C"
    return dict(key=f"{pid}-{cond}", pair_id=pid, model=model, model_revision="rev", dtype="float32",
                benchmark="builtin", site="resid_post.12", operator="add", dose=64.0, hook_scope=scope, track=track,
                probe_family="spontaneous" if c else "detection", condition=cond, item_id=f"item{item:02d}", seed=seed,
                parse_ok=parse_ok, detected=None if c else det, graded=None if c else graded,
                rubric_flag=det if c else None, run="synthetic")


def synth(rng, track, p_int, p_sham, items=range(30), seeds=(0, 1)):
    out = []
    for i in items:
        for s in seeds:
            for cond, p in (("intervention", p_int), ("sham", p_sham)):
                det = bool(rng.random() < p)
                out.append(rec(track, i, s, cond, det, round(0.5 * det + 0.5 * rng.random(), 2)))
    return out


def _dprime(y_int, y_sham):
    def rate(y):
        n = len(y)
        return min(max(sum(y) / n, 1 / (2 * n)), 1 - 1 / (2 * n))
    return norm.ppf(rate(y_int)) - norm.ppf(rate(y_sham))


def _auc(g_int, g_sham):
    return roc_auc_score([1] * len(g_int) + [0] * len(g_sham), list(g_int) + list(g_sham))


# A small hand-checkable case: 5 items, one seed; Track A separates, B_delayed barely.
SMALL = {
    "A": [(1, 0.9, 0, 0.1), (1, 0.8, 0, 0.3), (1, 0.7, 1, 0.6), (0, 0.4, 0, 0.2), (1, 0.95, 0, 0.4)],
    "B_delayed": [(1, 0.6, 1, 0.7), (0, 0.3, 0, 0.3), (1, 0.55, 0, 0.5), (0, 0.2, 1, 0.6), (1, 0.8, 0, 0.1)],
}


def small_rows():
    return [rec(t, i, 0, cond, bool(d), g) for t, vals in SMALL.items() for i, (di, gi, ds, gs) in enumerate(vals)
            for cond, d, g in (("intervention", di, gi), ("sham", ds, gs))]


def _split(track):
    v = SMALL[track]
    return [x[0] for x in v], [x[1] for x in v], [x[2] for x in v], [x[3] for x in v]


def test_point_estimates_match_scipy_and_sklearn():
    rows = small_rows()
    c = track_contrast(track_rows(rows, "A"), track_rows(rows, "B_delayed"), "A", "B_delayed", n_boot=50)
    ya, ga, sa, gsa = _split("A")
    yb, gb, sb, gsb = _split("B_delayed")
    assert c["dprime"]["A"] == pytest.approx(_dprime(ya, sa))  # 4/5 hits, 1/5 false alarms
    assert c["dprime"]["A"] == pytest.approx(norm.ppf(0.8) - norm.ppf(0.2))
    assert c["auroc"]["A"] == pytest.approx(_auc(ga, gsa))
    assert c["dprime"]["diff"] == pytest.approx(_dprime(ya, sa) - _dprime(yb, sb))
    assert c["auroc"]["diff"] == pytest.approx(_auc(ga, gsa) - _auc(gb, gsb))
    assert c["items_paired"] == 5 and c["items_dropped"] == {"A": 0, "B_delayed": 0}


def test_interval_is_the_joint_item_bootstrap_drawn_by_hand():
    rows = small_rows()
    n_boot, seed = 120, 3
    c = track_contrast(track_rows(rows, "A"), track_rows(rows, "B_delayed"), "A", "B_delayed", n_boot=n_boot,
                       seed=seed, level=0.9)
    idx = np.random.default_rng(seed).integers(0, 5, size=(n_boot, 5))  # items sorted by id: item00..item04
    d_diff, a_diff = [], []
    ya, ga, sa, gsa = _split("A")
    yb, gb, sb, gsb = _split("B_delayed")
    for drawn in idx:  # every drawn item carries its A pair and its B pair together
        A = [[v[j] for j in drawn] for v in (ya, ga, sa, gsa)]
        B = [[v[j] for j in drawn] for v in (yb, gb, sb, gsb)]
        d_diff.append(_dprime(A[0], A[2]) - _dprime(B[0], B[2]))
        a_diff.append(_auc(A[1], A[3]) - _auc(B[1], B[3]))
    assert c["dprime"]["ci"] == pytest.approx(list(np.quantile(d_diff, [0.05, 0.95])))
    assert c["auroc"]["ci"] == pytest.approx(list(np.quantile(a_diff, [0.05, 0.95])))
    se = np.std(a_diff, ddof=1)
    assert c["p_value"] == pytest.approx(2 * norm.sf(abs(c["auroc"]["diff"]) / se))


def test_primary_contrasts_take_benjamini_hochberg_across_cells():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(2)
    rows = []
    for scope, p_a in (("active", 0.95), ("lifted", 0.6)):
        for r in synth(rng, "A", p_a, 0.05) + synth(rng, "B_delayed", 0.6, 0.4) + synth(rng, "C", 0.3, 0.3):
            rows.append({**r, "hook_scope": scope, "pair_id": r["pair_id"] + scope})
    d = decay_contrasts(rows, n_boot=300, seed=0, level=0.9)
    fam = [c for cell in d["cells"] for c in cell["contrasts"]]
    reject, q, _, _ = multipletests([c["p_value"] for c in fam], alpha=0.1, method="fdr_bh")
    assert [c["bh_q"] for c in fam] == pytest.approx(list(q))
    for c, rej in zip(fam, reject):
        assert c["positive"] == bool(c["interval_above_zero"] and rej)


def test_marginal_intervals_use_the_stats_modules_draws():
    from tamperbench.stats.bootstrap import detection_bootstrap
    from tamperbench.stats.pairs import paired_detection

    rows = small_rows()
    c = track_contrast(track_rows(rows, "A"), track_rows(rows, "B_delayed"), "A", "B_delayed", n_boot=300, seed=5)
    p = paired_detection(track_rows(rows, "A"))
    b = detection_bootstrap(p["y_a"], p["y_b"], p["clusters"], g_int=p["g_a"], g_sham=p["g_b"], n_boot=300, seed=5)
    assert c["dprime"]["A_ci"] == pytest.approx(list(b["dprime"]["ci"]))
    assert c["auroc"]["A_ci"] == pytest.approx(list(b["auroc"]["ci"]))


def test_decay_licensed_when_only_track_a_has_a_margin():
    rng = np.random.default_rng(0)
    rows = synth(rng, "A", 0.9, 0.1) + synth(rng, "B_delayed", 0.3, 0.3) + synth(rng, "C", 0.3, 0.3)
    d = decay_contrasts(rows, n_boot=400, seed=1)
    (cell,) = d["cells"]
    ab, bc = cell["contrasts"]
    assert ab["contrast"] == "A - B_delayed" and ab["positive"] is True and ab["dprime"]["ci"][0] > 0
    assert bc["contrast"] == "B_delayed - C"
    # B and C have no margin, so B - C is not positive and the full ordering is not licensed
    assert bc["positive"] is False
    assert cell["verdict"]["level"] == "one_leg" and "A -> B_delayed pair only" in cell["verdict"]["claim"]
    assert "condition-blinded rubric" in cell["verdict"]["claim"]


def test_decay_licensed_when_margin_falls_at_each_track():
    rng = np.random.default_rng(2)
    rows = synth(rng, "A", 0.95, 0.05) + synth(rng, "B_delayed", 0.65, 0.35) + synth(rng, "C", 0.3, 0.3)
    (cell,) = decay_contrasts(rows, n_boot=400, seed=1)["cells"]
    assert [c["positive"] for c in cell["contrasts"]] == [True, True]
    assert cell["verdict"]["level"] == "licensed" and "temporal decay licensed" in cell["verdict"]["claim"]
    # the same numbers with Track C's path not validated license only the A -> B pair
    paths = {**TRACK_PATHS, "C": {**TRACK_PATHS["C"], "validated": False}}
    v = decay_verdict(cell["contrasts"], paths)
    assert v["level"] == "one_leg" and any("Track C not validated" in w for w in v["legs"])


def test_equal_tracks_not_licensed_interval_covers_zero():
    # every track holds the same reports, moved to other items (item i gets item i+k's): equal margins,
    # so both differences are exactly 0, while the item-level pairing still varies across replicates
    a = synth(np.random.default_rng(4), "A", 0.6, 0.4)
    rows = list(a)
    for k, t in ((7, "B_delayed"), (13, "C")):
        for r in a:
            i = (int(r["item_id"][4:]) + k) % 30
            rows.append({**rec(t, i, r["seed"], r["condition"], r["detected"], r["graded"]),
                         **({"graded": None} if t == "C" else {})})
    (cell,) = decay_contrasts(rows, n_boot=400, seed=1)["cells"]
    for c in cell["contrasts"]:
        assert c["dprime"]["diff"] == pytest.approx(0) and c["items_paired"] == 30
        for s in ("dprime", "auroc"):
            assert c[s]["ci"][0] < 0 < c[s]["ci"][1], (c["contrast"], s, c[s])
        assert c["positive"] is False
    assert cell["verdict"]["level"] == "not_licensed" and "not evidence of no decay" in cell["verdict"]["claim"]


def test_missing_track_is_not_estimable_with_reason():
    rng = np.random.default_rng(0)
    rows = synth(rng, "A", 0.9, 0.1) + synth(rng, "B_delayed", 0.3, 0.3)
    rows += synth(rng, "A", 0.9, 0.1, items=range(4))  # a second scope where only Track A ran
    for r in rows[-16:]:
        r["hook_scope"], r["pair_id"] = "lifted", r["pair_id"] + "-lifted"
    cells = {c["cell"]["hook_scope"]: c for c in decay_contrasts(rows, n_boot=200)["cells"]}
    ab, bc = cells["active"]["contrasts"]
    assert ab["positive"] is True
    assert bc["estimable"] is False and bc["reason"] == "Track C not executed in this cell (no intervention/sham rows)"
    assert cells["active"]["verdict"]["level"] == "one_leg"
    only_a = cells["lifted"]
    assert only_a["verdict"]["level"] == "not_estimable"
    assert all("Track B_delayed not executed" in w for w in only_a["verdict"]["legs"])


def test_masked_track_b_does_not_stand_in_for_track_b():
    rng = np.random.default_rng(0)
    rows = synth(rng, "A", 0.9, 0.1) + synth(rng, "B_masked", 0.3, 0.3)
    (cell,) = decay_contrasts(rows, n_boot=200)["cells"]
    sec = [c for c in cell["contrasts"] if c["contrast"] == "A - B_masked"]
    assert sec and sec[0]["positive"] is True and sec[0]["role"].startswith("secondary")
    assert cell["verdict"]["level"] == "not_estimable"  # the masked immediate-path variant is not Track B


def test_unpaired_items_dropped_and_counted_never_imputed():
    rng = np.random.default_rng(0)
    rows = synth(rng, "A", 0.9, 0.1, items=range(12)) + synth(rng, "B_delayed", 0.3, 0.3, items=range(2, 10))
    # item 05 loses its B sham in both seeds (missing row), item 06's B sham is unparsed in seed 0 only
    rows = [r for r in rows if not (r["track"] == "B_delayed" and r["item_id"] == "item05" and r["condition"] == "sham")]
    for r in rows:
        if r["track"] == "B_delayed" and r["item_id"] == "item06" and r["condition"] == "sham" and r["seed"] == 0:
            r["parse_ok"], r["detected"], r["graded"] = False, None, None
    (cell,) = decay_contrasts(rows, n_boot=100)["cells"]
    ab = cell["contrasts"][0]
    assert ab["items_paired"] == 7  # items 2..9 less item05
    assert ab["items_dropped"] == {"A": 5, "B_delayed": 0}  # A's items 0, 1, 5, 10, 11
    assert ab["pairs"] == {"A": 14, "B_delayed": 13}  # item06 keeps its seed-1 pair
    assert ab["excluded_pairs"]["B_delayed"] == {"missing_sham": 2, "sham_unparsed": 1}


def test_seed_changes_the_interval_and_level_is_recorded():
    rng = np.random.default_rng(0)
    rows = synth(rng, "A", 0.8, 0.2) + synth(rng, "B_delayed", 0.5, 0.4)
    a = decay_contrasts(rows, n_boot=300, seed=0)
    b = decay_contrasts(rows, n_boot=300, seed=1)
    again = decay_contrasts(rows, n_boot=300, seed=0)
    ci = lambda d: d["cells"][0]["contrasts"][0]["dprime"]["ci"]  # noqa: E731
    assert ci(a) != ci(b) and ci(a) == ci(again)
    assert a["cells"][0]["contrasts"][0]["dprime"]["diff"] == b["cells"][0]["contrasts"][0]["dprime"]["diff"]
    narrow = decay_contrasts(rows, n_boot=300, seed=0, level=0.8)
    assert (narrow["level"], narrow["n_boot"], narrow["seed"]) == (0.8, 300, 0)
    lo80, hi80 = ci(narrow)
    lo95, hi95 = ci(a)
    assert lo95 < lo80 and hi80 < hi95


def test_unknown_track_is_one_line_naming_the_field():
    rows = small_rows()
    rows[3] = {**rows[3], "track": "B_later"}
    with pytest.raises(UserError) as err:
        decay_contrasts(rows, n_boot=10)
    msg = str(err.value)
    assert msg.startswith("track:") and "'B_later'" in msg and rows[3]["key"] in msg and "\n" not in msg


def test_cited_validation_tests_exist():
    for track, info in TRACK_PATHS.items():
        for node in info["tests"]:
            path, name = node.split("::")
            text = (ROOT / path).read_text()
            assert re.search(rf"^def {name}\(", text, re.M), (track, node)


class _Spec(BaseModel):
    name: str = "synthetic decay"


def _store(run, rows, *, construct=False):
    """Write rows as ``OwmiRun`` records into a real DuckDB run directory (``construct``: unvalidated,
    as a record written by another tool could be)."""
    from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
    from tamperbench.store import RunStore
    from tamperbench.store.run_store import trial_key

    make = OwmiRun.model_construct if construct else OwmiRun
    recs = [make(**{k: v for k, v in r.items() if k not in ("run", "key")}, key=trial_key([r["key"]]), cell_id="c",
                 quantized=False, temperature=0.0, top_p=1.0, max_new_tokens=8, readout="generated", domain="knowledge",
                 item_provenance="{}", object_kind="resid_post", layer=12, positions="task", when="prefill",
                 probe_text="p", prompt_text="t", prompt_ids=[1], intervened_positions=[], response="{}",
                 finish_reason="stop") for r in rows]
    store = RunStore.open(run, _Spec())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, recs)
    store.close()


def test_score_files_and_site_table_carry_the_contrasts(tmp_path):
    """``owmi score`` on a real run directory (DuckDB store): Markdown, CSV and JSON hold the
    contrasts, the model line no longer says decay is not claimed, and the site gets the table."""
    import csv
    import json

    from tamperbench.owmi.score.profile import score_runs
    from tamperbench.owmi.score.render import save
    from tamperbench.owmi.score.site import _tables

    rng = np.random.default_rng(0)
    model = "m|<b>x</b>"
    _store(tmp_path / "run", [{**r, "model": model} for r in synth(rng, "A", 0.9, 0.1, items=range(12))
                              + synth(rng, "B_delayed", 0.3, 0.3, items=range(12))])
    result = score_runs([tmp_path / "run"], n_boot=200, seed=2, dose_boot=0, decay_level=0.9)
    d = result["decay"]
    assert (d["n_boot"], d["seed"], d["level"]) == (200, 2, 0.9)
    paths = save(result, tmp_path / "out")
    md = paths["markdown"].read_text()
    assert "## Temporal decay across tracks" in md and "not claimed by this scorer" not in md
    assert "m\\|&lt;b&gt;x&lt;/b&gt;" in md and "<b>" not in md and "temporal decay (Eq. 19, D.5): one pair only in 1 of 1 cells" in md
    got = list(csv.DictReader(paths["decay_csv"].open()))
    assert [r["contrast"] for r in got] == ["A - B_delayed", "B_delayed - C"]
    assert got[0]["items_paired"] == "12" and got[1]["reason"].startswith("Track C not executed")
    assert json.loads(paths["json"].read_text())["decay"]["cells"][0]["verdict"]["level"] == "one_leg"
    (table,) = [t for t in _tables(result) if t.slug == "owmi-decay"]
    assert len(table.rows) == 2 and "m\\|" in table.to_markdown()
    assert table.rows[1][5].text.startswith("not estimable: Track C")


def test_cli_unknown_track_is_one_error_line_exit_2(tmp_path, tb_inprocess):
    rows = small_rows()
    rows[0]["track"] = "D"
    _store(tmp_path / "run", rows, construct=True)
    res = tb_inprocess("owmi", "score", tmp_path / "run", "--boot", "10", "--out", tmp_path / "s")
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: track:") and "'D'" in lines[0], res.stderr


def test_inclusive_coding_counts_unparsed_reports_as_zero_evidence():
    rows = small_rows()
    for r in rows:  # A's item 00 intervention report unparsed: out of the complete pairs, a 0 in the inclusive ones
        if r["track"] == "A" and r["item_id"] == "item00" and r["condition"] == "intervention":
            r["parse_ok"], r["detected"], r["graded"] = False, None, None
    (cell,) = decay_contrasts(rows, n_boot=50)["cells"]
    ab = cell["contrasts"][0]
    ya, ga, sa, gsa = _split("A")
    yb, gb, sb, gsb = _split("B_delayed")
    assert ab["items_paired"] == 4 and ab["items_dropped"] == {"A": 0, "B_delayed": 1}
    assert ab["dprime"]["diff"] == pytest.approx(_dprime(ya[1:], sa[1:]) - _dprime(yb[1:], sb[1:]))
    inc = ab["inclusive"]
    assert inc["items_paired"] == 5
    assert inc["dprime_diff"] == pytest.approx(_dprime([0] + ya[1:], sa) - _dprime(yb, sb))
    assert inc["auroc_diff"] == pytest.approx(_auc([0.0] + ga[1:], gsa) - _auc(gb, gsb))


def test_cli_decay_level_and_boot_are_recorded(tmp_path, tb_inprocess):
    import json

    _store(tmp_path / "run", small_rows())
    res = tb_inprocess("owmi", "score", tmp_path / "run", "--boot", "40", "--seed", "3", "--decay-level", "0.8",
                       "--dose-boot", "0", "--out", tmp_path / "s")
    assert res.returncode == 0, res.stderr
    d = json.loads((tmp_path / "s" / "owmi_score.json").read_text())["decay"]
    assert (d["level"], d["n_boot"], d["seed"]) == (0.8, 40, 3)
    assert "80% item-clustered bootstrap, 40 replicates, seed 3" in res.stdout
