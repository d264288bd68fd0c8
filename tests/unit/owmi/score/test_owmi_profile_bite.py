"""How ``score_runs`` (owmi/score/profile.py) wires the cells, BH, anchors, pools and variance.

Why: the estimators are tested in ``tamperbench.stats`` and ``score.py``; this module decides which
rows each estimator sees and which anchor a cell's claim reads. A probe anchor of another site, a
known-positive of another model, a pool of the wrong model or a BH q-value on the wrong cell
would each publish a wrong verdict while every estimator stays correct. Expected values: BH from
statsmodels, rho by hand (Eq. 15: margin / m_probe), the pools and variance inputs grouped here by
hand from the records written, then passed to the estimators. Pure apart from one DuckDB run
directory written with the real RunStore; no model.
"""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import BaseModel

from tamperbench.owmi.score import identity
from tamperbench.owmi.score.claims import claim
from tamperbench.owmi.score.decay import decay_contrasts
from tamperbench.owmi.score.profile import _anchor_for, score_runs
from tamperbench.owmi.score.score import detection_entry, load_runs, variance_entry
from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.store import RunStore
from tamperbench.store.run_store import trial_key

# the cells' own intervention (C.8: a probe attaches only to cells whose intervention it read)
OWN_IV = {"intervention": {"operator": "add", "dose": 4.0, "direction": "concepts ocean"}}

REV = {"m": "revmmmmmmmmmmmmmmmmmm", "m2": "rev2222222222222222"}
N_BOOT, SEED = 40, 0  # seed and decay level left to their defaults (0, 0.95), as the report site does


class _Spec(BaseModel):
    name: str = "profile bite"


def _records():
    rng = np.random.default_rng(11)
    out = []
    for model, sites in (("m", ("resid_post.3", "resid_post.5")), ("m2", ("resid_post.3",))):
        for site in sites:
            for i in range(6):
                for seed in (0, 1):
                    pid = f"{model}-{site}-{i}-{seed}"
                    for cond, p in (("intervention", 0.8 if site.endswith("3") else 0.5), ("sham", 0.3),
                                    ("random_unit", 0.3), ("observer", 0.4)):
                        det = bool(rng.random() < p)
                        out.append(OwmiRun(
                            key=trial_key([pid, cond]), pair_id=pid, cell_id="c", model=model,
                            model_revision=REV[model], dtype="float32", quantized=False, temperature=0.0, top_p=1.0,
                            max_new_tokens=8, readout="generated", benchmark="b", domain="knowledge" if i % 2 else "arithmetic",
                            item_id=f"item{i}", item_provenance="{}", object_kind="resid_post", site=site, layer=3,
                            operator="add", dose=4.0, positions="task", when="prefill", seed=seed, condition=cond,
                            hook_scope="active", track="A", probe_family="detection", probe_text="p",
                            observer_tier=1 if cond == "observer" else None, prompt_text="t", prompt_ids=[1],
                            intervened_positions=[], response="{}", finish_reason="stop", parse_ok=True, detected=det,
                            graded=round((0.6 if det else 0.0) + 0.4 * rng.random(), 3)))
    # a localization probe: a cell with a confidence entry but no detection entry
    out.append(out[0].model_copy(update={"key": trial_key(["loc"]), "probe_family": "localization",
                                         "pair_id": "loc"}))
    # a run another tool wrote without its prompt text: excluded and listed, never analysed
    out.append(OwmiRun.model_construct(**{**out[1].model_dump(), "key": trial_key(["bad"]), "prompt_text": ""}))
    return out


IDENT_M = {"model": "m", "model_revision": REV["m"], "dtype": "float32", "quantized": False}
ANCHORS = [  # saved through the real anchor store, one anchor run directory each, read back in this order
    {"kind": "probe", **OWN_IV, "model": "m", "provenance_id": "other-weights", "site": "resid_post.3", "layer": 3, "m_probe": 0.9,
     "passes": True, "layers": [{"null_quantile": 0.1}], "tag": "old, by model name"},
    {"kind": "probe", **OWN_IV, **IDENT_M, "provenance_id": "p", "site": "resid_post.3", "layer": 3, "m_probe": 0.4,
     "passes": True, "layers": [{"null_quantile": 0.1}], "tag": "by identity, later"},
    {"kind": "probe", **OWN_IV, **IDENT_M, "provenance_id": "p", "site": "resid_post.9", "layer": 9, "m_probe": 0.2,
     "passes": True, "layers": [{"null_quantile": 0.1}], "tag": "other site"},
    {"kind": "known_positive_check", "model": "m", "provenance_id": "x", "site": "resid_post.5", "layer": 5,
     "readout": "generated", "passes": True, "why": "meets the rule", "tag": "kp m",
     "adapted": {"pairs": 100, "hits": 99, "false_alarms": 1, "dprime": 4.2, "auroc": 0.99, "auroc_ci": [0.97, 1.0]},
     "leakage_floor": {"auroc": 0.6, "auroc_ci": [0.5, 0.7]}},
    {"kind": "known_positive_check", "model": "zz", "provenance_id": "y", "site": "resid_post.3", "layer": 3,
     "readout": "generated", "passes": False, "why": "no complete pair", "adapted": {}, "tag": "kp other model"},
    {"kind": "probe", **OWN_IV, **IDENT_M, "dtype": "bfloat16", "provenance_id": "p", "site": "resid_post.3", "layer": 3,
     "m_probe": 0.7, "passes": True, "layers": [{"null_quantile": 0.1}], "tag": "other precision, last"},
    {"kind": "probe", **OWN_IV, **IDENT_M, "model": "renamed", "provenance_id": "p", "site": "resid_post.3", "layer": 3,
     "m_probe": 0.7, "passes": True, "layers": [{"null_quantile": 0.1}], "tag": "other name, last"},
]


def test_anchor_for_matches_kind_identity_and_site_and_takes_the_last():
    row = IDENT_M
    m2 = {"model": "m2", "model_revision": REV["m2"], "dtype": "float32", "quantized": False}
    idents = {identity.of(row), identity.of(m2)}
    got = _anchor_for(ANCHORS, "probe", row, "resid_post.3", idents)
    assert got["tag"] == "by identity, later" and got["identity_matched"] is True
    got = _anchor_for(ANCHORS[:1], "probe", row, "resid_post.3", idents)
    assert got["tag"] == "old, by model name" and got["identity_matched"] is False
    assert _anchor_for(ANCHORS, "probe", row, "resid_post.9", idents)["tag"] == "other site"
    assert _anchor_for(ANCHORS, "probe", row, "resid_post.4", idents) is None
    got = _anchor_for(ANCHORS, "known_positive_check", row, None, idents)  # any site when none is asked
    assert got["tag"] == "kp m" and got["identity_matched"] is False
    assert _anchor_for(ANCHORS, "probe", row, None, idents)["tag"] == "other site"
    assert _anchor_for(ANCHORS, "known_positive_check", m2, None, idents) is None
    assert "identity_matched" not in ANCHORS[0]  # the listed anchors stay as read


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    from tamperbench.owmi.score.anchor_store import save_anchor

    tmp = tmp_path_factory.mktemp("profile")
    store = RunStore.open(tmp / "run", _Spec())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, _records())
    store.close()
    # the probe matched by identity and the old known-positive by name (one identity under "m"; other cases: above)
    paths = [tmp / "run"] + [save_anchor(tmp / f"anchor{i}", _Spec(name=ANCHORS[i]["tag"]), ANCHORS[i]) for i in (1, 3)]
    result = score_runs(paths, n_boot=N_BOOT, dose_boot=0)
    rows, _, excluded = load_runs([tmp / "run"])
    store = RunStore.open(tmp / "one_model", _Spec(name="one model"))
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, [r for r in _records() if r.model == "m2"])
    store.close()
    single = score_runs([tmp / "one_model"], n_boot=5, dose_boot=0)
    # the same pairs run again under other weights of the same model name: two revisions, never one pool of pairs
    store = RunStore.open(tmp / "two_revisions", _Spec(name="two revisions"))
    store.ensure_table(RUNS_TABLE, OwmiRun)
    m2 = [r for r in _records() if r.model == "m2"]
    store.write(RUNS_TABLE, m2 + [r.model_copy(update={"key": trial_key([r.key, "r3"]), "model_revision": "rev3"})
                                  for r in m2])
    store.close()
    two = score_runs([tmp / "two_revisions"], n_boot=5, dose_boot=0)
    return result, rows, excluded, paths, single, two


def test_cells_bh_claims_rho_pools_variance_and_decay(scored):
    result, rows, excluded, paths, single, two = scored
    # 12 pairs under each revision, paired within its revision and listed under it (one name, two entries)
    assert {k: (v["model_revision"], v["pairs"]) for k, v in two["variance"].items()} == {
        "m2 @ rev222222222 float32": (REV["m2"], 12), "m2 @ rev3 float32": ("rev3", 12)}
    # the pool over both revisions pairs within each (it raised "more than one 'intervention' row" before)
    assert [p["pool"] for p in two["pooled"]] == ["m2 [rev222222222, float32] all detection cells",
                                                   "m2 [rev3, float32] all detection cells",
                                                   "all models [float32, full precision]"]
    assert [p["complete"]["pairs"] for p in two["pooled"]] == [12, 12, 24]
    assert [p["pool"] for p in single["pooled"]] == ["m2 [rev222222222, float32] all detection cells"]  # no all-models pool
    assert single["all_models_pool"] == {
        "formed": [], "precisions": [{"dtype": "float32", "quantized": False, "model_weights": 1}],
        "reason": "one model's weights only: its per-model pool is the whole pool"}
    assert two["all_models_pool"]["formed"] == ["all models [float32, full precision]"]
    assert two["all_models_pool"]["reason"] == "every run at one precision (float32, full precision: 2 model revisions)"
    assert result["runs"] == list(map(str, paths)) and result["n_rows"] == len(rows) == len(_records()) - 1
    assert result["excluded_runs"] == excluded and excluded[0]["missing"] == ["prompt_text"]
    assert result["anchors"] == [ANCHORS[1], ANCHORS[3]]
    cells = result["cells"]
    loc = [c for c in cells if c["cell"]["probe_family"] == "localization"]
    assert len(loc) == 1 and "detection" not in loc[0] and "claim" not in loc[0] and loc[0]["runs"] == 1
    det = [c for c in cells if c["cell"]["probe_family"] == "detection"]
    assert [(c["cell"]["model"], c["cell"]["site"], c["runs"]) for c in det] == [
        ("m", "resid_post.3", 48), ("m", "resid_post.5", 48), ("m2", "resid_post.3", 48)]
    for c in det:  # each cell's entry is the estimator's output on exactly that cell's rows and settings
        rs = [r for r in rows if r["model"] == c["cell"]["model"] and r["site"] == c["cell"]["site"]
              and r["probe_family"] == "detection"]
        want = detection_entry(rs, N_BOOT, SEED)
        assert {k: v for k, v in c["detection"].items() if k != "complete"} == \
            {k: v for k, v in want.items() if k != "complete"}
        assert {k: v for k, v in c["detection"]["complete"].items() if k not in ("bh_q", "bh_reject", "verdict")} == \
            want["complete"]
    # 6 items per cell, below the item floor (verdict.ITEM_FLOOR): no cell enters the BH family, none licenses a
    # claim beyond a diagnosis (the family over cells at the floor: test_owmi_verdicts_bite.py)
    assert result["bh"]["m"] == 0
    for c in det:
        comp = c["detection"]["complete"]
        assert comp["bh_q"] is None and comp["bh_reject"] is None
        assert comp["verdict"]["too_few_items"] is True and c["claim"]["level"] <= 1
    probe3, kp = {**ANCHORS[1], "identity_matched": True}, {**ANCHORS[3], "identity_matched": False}
    # the known-positive check attaches at its own site (resid_post.5) and read-out only
    for c, probe, known in zip(det, (probe3, None, None), (None, kp, None)):
        comp = c["detection"]["complete"]
        assert c["claim"] == claim(c["detection"], probe=probe, known_positive=known, ladder=None,
                                   bh_reject=comp["bh_reject"])
    comp = det[0]["detection"]["complete"]
    rho = det[0]["rho"]
    assert rho["rho"] == pytest.approx(comp["margin"] / 0.4)
    assert rho["ci"] == pytest.approx((comp["margin_ci"][0] / 0.4, comp["margin_ci"][1] / 0.4))
    assert det[1]["rho"] is None and det[2]["rho"] is None

    # -- pools, variance inputs, decay (one test with the cells: mutmut maps a module fixture's calls to the
    # first test that uses it, so a second test would never run against a mutant of score_runs)
    det_rows = [r for r in rows if r["probe_family"] == "detection"]
    by = {m: [r for r in det_rows if r["model"] == m] for m in ("m", "m2")}
    assert [p["pool"] for p in result["pooled"]] == [
        "m [revmmmmmmmmm, float32] all detection cells", "m2 [rev222222222, float32] all detection cells",
        "all models [float32, full precision]"]
    for pool, rs in zip(result["pooled"], (by["m"], by["m2"], det_rows)):
        got_pool = {k: v for k, v in pool.items() if k not in ("pool", "readout")}
        assert got_pool["complete"].pop("verdict")["decided_by"].startswith("unadjusted")
        assert got_pool == detection_entry(rs, N_BOOT, SEED)
    # variance: one graded margin s = g_int - g_sham per complete pair, with its domain, site, item, seed
    pairs = {}
    for m, rs in by.items():
        ints = {r["pair_id"]: r for r in rs if r["condition"] == "intervention"}
        shams = {r["pair_id"]: r for r in rs if r["condition"] == "sham"}
        pairs[m] = [{"s": ints[k]["graded"] - shams[k]["graded"], "domain": ints[k]["domain"],
                     "object": ints[k]["site"], "item": ints[k]["item_id"], "seed": ints[k]["seed"]}
                    for k in sorted(ints)]
    got = result["variance"]
    ident = {m: {"model": m, "model_revision": REV[m], "dtype": "float32", "quantized": False, "readout": "generated",
                 "label": f"{m} @ {REV[m][:12]} float32"} for m in ("m", "m2")}
    assert got["m2"] == {**ident["m2"], "estimable": False, "pairs": 12,
                         "reason": "needs >= 2 domains, >= 2 objects and >= 8 complete pairs"}
    want = {**ident["m"], **variance_entry({"m": pairs["m"]})["m"]}
    assert got["m"]["estimable"] is True and got["m"]["pairs"] == 24
    assert got["m"] == want
    assert result["decay"] == decay_contrasts(rows, n_boot=N_BOOT, seed=SEED, level=0.95)


# ---------------------------------------------------------------- precision: never one d' over mixed dtypes
WHY_NOT = ("are not pooled into one d' (Appendix D.4: quantized and full-precision runs are not pooled; a precision "
           "change would read as a model difference)")


def _write(tmp, name, records):
    store = RunStore.open(tmp / name, _Spec(name=name))
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, records)
    store.close()
    return tmp / name


@pytest.fixture(scope="module")
def precisions(tmp_path_factory):
    """Three run sets: two models at two dtypes; three models of which two share float32; a dequantized
    GGUF (quantized, float32) beside a full-precision float32 model."""
    tmp = tmp_path_factory.mktemp("precision")
    recs = _records()[:-2]  # detection rows of m (24 pairs) and m2 (12 pairs)
    m3 = [r.model_copy(update={"key": trial_key([r.key, "m3"]), "model": "m3", "model_revision": "rev3",
                               "pair_id": "m3" + r.pair_id[2:], "dtype": "bfloat16"}) for r in recs if r.model == "m2"]
    mixed = [r.model_copy(update={"dtype": "bfloat16"}) if r.model == "m2" else r for r in recs]
    quant = [r.model_copy(update={"quantized": True}) if r.model == "m" else r for r in recs]
    quant += [r.model_copy(update={"dtype": "float32", "quantized": True}) for r in m3]
    loc = [r.model_copy(update={"key": trial_key([r.key, "loc"]), "probe_family": "localization"}) for r in recs]
    out = {}
    for name, rs in (("mixed", mixed), ("three", recs + m3), ("quant", quant), ("no_detection", loc)):
        path = _write(tmp, name, rs)
        out[name] = (score_runs([path], n_boot=5, dose_boot=0), load_runs([path])[0])
    return out


def test_all_models_pool_only_within_one_precision(precisions):
    from tamperbench.owmi.score.render import to_markdown

    # float32 m + bfloat16 m2: no all-models pool at all (one was formed over both dtypes before)
    result, rows = precisions["mixed"]
    assert [p["pool"] for p in result["pooled"]] == ["m [revmmmmmmmmm, float32] all detection cells",
                                                     "m2 [rev222222222, bfloat16] all detection cells"]
    note = result["all_models_pool"]
    assert note["formed"] == []
    assert note["precisions"] == [{"dtype": "bfloat16", "quantized": False, "model_weights": 1},
                                  {"dtype": "float32", "quantized": False, "model_weights": 1}]
    assert note["reason"] == (
        "runs at 2 precisions (bfloat16, full precision: 1 model revision; float32, full precision: 1 model revision) "
        f"{WHY_NOT}; no precision holds two model weights, so each model has its own pool only")
    md = to_markdown(result)
    assert "- all-models pools: none (runs at 2 precisions" in md

    # m, m2 float32 + m3 bfloat16: one all-models pool, over the two float32 models' rows only
    result, rows = precisions["three"]
    assert [p["pool"] for p in result["pooled"]] == [
        "m [revmmmmmmmmm, float32] all detection cells", "m2 [rev222222222, float32] all detection cells",
        "m3 [rev3, bfloat16] all detection cells", "all models [float32, full precision]"]
    f32 = [r for r in rows if r["dtype"] == "float32" and r["probe_family"] == "detection"]
    assert {r["model"] for r in f32} == {"m", "m2"}
    pool = result["pooled"][-1]
    assert pool["complete"]["pairs"] == 36  # 24 + 12: m3's 12 bfloat16 pairs stay out
    got_pool = {k: v for k, v in pool.items() if k not in ("pool", "readout")}
    assert got_pool["complete"].pop("verdict")["name"] == "undetermined"  # 6 items: below the floor
    assert got_pool == detection_entry(f32, 5, SEED)
    assert result["all_models_pool"]["formed"] == ["all models [float32, full precision]"]
    assert result["all_models_pool"]["reason"] == (
        "runs at 2 precisions (bfloat16, full precision: 1 model revision; float32, full precision: 2 model revisions) "
        f"{WHY_NOT}; one all-models pool per precision holding two or more model weights")

    # dequantized GGUFs (float32, quantized) are pooled with each other, not with a full-precision float32 model
    result, rows = precisions["quant"]
    assert [p["pool"] for p in result["pooled"]] == [
        "m [revmmmmmmmmm, float32, quantized] all detection cells", "m2 [rev222222222, float32] all detection cells",
        "m3 [rev3, float32, quantized] all detection cells", "all models [float32, quantized]"]
    q = [r for r in rows if r["quantized"] and r["probe_family"] == "detection"]
    assert {r["model"] for r in q} == {"m", "m3"} and result["pooled"][-1]["complete"]["pairs"] == 36
    assert result["all_models_pool"] == {
        "formed": ["all models [float32, quantized]"],
        "precisions": [{"dtype": "float32", "quantized": False, "model_weights": 1},
                       {"dtype": "float32", "quantized": True, "model_weights": 2}],
        "reason": "runs at 2 precisions (float32, full precision: 1 model revision; float32, quantized: 2 model "
                  f"revisions) {WHY_NOT}; one all-models pool per precision holding two or more model weights"}
    # no detection rows: no pool, and the note says so
    result, rows = precisions["no_detection"]
    assert rows and result["pooled"] == []
    assert result["all_models_pool"] == {"formed": [], "precisions": [], "reason": "no detection rows"}


# ---------------------------------------------------------------- dose ladder and variance wiring
def _close(a, b, rel=1e-4, text=True) -> bool:
    """Nested equality with floats within ``rel``: the mixed-model fit behind a ladder moves its last
    digits between calls (its optimiser), so two fits of the same rows agree to about 1e-6, not bit
    for bit. ``text=False`` also lets strings differ (a claim's words quote those digits)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel, text) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, rel, text) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=rel, abs=1e-9, nan_ok=True)
    if isinstance(a, str) and isinstance(b, str) and not text:
        return True
    return a == b


@pytest.fixture(scope="module")
def laddered(tmp_path_factory):
    """m at resid_post.3 on a two-dose ladder (4, 8); m at resid_post.5 and m2 at one dose (no ladder);
    m2 run again at bfloat16 under the same pair ids (its variance pairs matched within each dtype)."""
    tmp = tmp_path_factory.mktemp("ladder")
    recs = _records()[:-2]
    # dose 8 over 20 items: enough clusters that the ladder's bootstrap intervals move with its size
    rng = np.random.default_rng(5)
    tmpl = [r for r in recs if (r.model, r.site, r.item_id, r.seed) == ("m", "resid_post.3", "item0", 0)]
    dose8 = [r.model_copy(update={"key": trial_key([f"d8-{i}-{seed}", r.condition]), "pair_id": f"d8-{i}-{seed}",
                                  "dose": 8.0, "item_id": f"item{i}", "seed": seed,
                                  "domain": "knowledge" if i % 2 else "arithmetic",
                                  "detected": bool(rng.random() < {"intervention": 0.7}.get(r.condition, 0.3))})
             for i in range(20) for seed in (0, 1) for r in tmpl]
    bf16 = [r.model_copy(update={"key": trial_key([r.key, "bf16"]), "dtype": "bfloat16"}) for r in recs if r.model == "m2"]
    conf = [r.model_copy(update={"key": trial_key([r.key, "conf"]), "probe_family": "confidence",
                                 "confidence": round(float(rng.random()), 3)}) for r in recs if r.model == "m2"]
    path = _write(tmp, "ladder", recs + dose8 + bf16 + conf)
    return score_runs([path], n_boot=5), load_runs([path])[0]  # dose_boot and seed left to their defaults


def test_dose_ladder_reaches_its_cells_claims_and_variance_pairs_match_within_dtype(laddered):
    from tamperbench.owmi.score.score import ladder_entry

    result, rows = laddered
    det = [r for r in rows if r["probe_family"] == "detection"]
    lad_rows = [r for r in det if r["model"] == "m" and r["site"] == "resid_post.3"]
    assert sorted({r["dose"] for r in lad_rows}) == [4.0, 8.0] and len(lad_rows) == 48 + 20 * 2 * 4
    cell = {"model": "m", "model_revision": REV["m"], "dtype": "float32", "quantized": False, "benchmark": "b",
            "site": "resid_post.3",
            "operator": "add", "probe_family": "detection", "track": "A", "hook_scope": "active", "readout": "generated"}
    want = ladder_entry(lad_rows, 100, 0)  # the default dose_boot (100) and seed (0)
    assert want["identified"] is True and not _close(want, ladder_entry(lad_rows, 101, 0))  # dose_boot shows
    assert len(result["ladders"]) == 1 and result["ladders"][0]["cell"] == cell
    assert _close({k: v for k, v in result["ladders"][0].items() if k != "cell"}, want)
    cells = [c for c in result["cells"] if c["cell"]["probe_family"] == "detection"]
    assert [(c["cell"]["model"], c["cell"]["dtype"], c["cell"]["site"], c["cell"]["dose"]) for c in cells] == [
        ("m", "float32", "resid_post.3", 4.0), ("m", "float32", "resid_post.3", 8.0),
        ("m", "float32", "resid_post.5", 4.0), ("m2", "bfloat16", "resid_post.3", 4.0),
        ("m2", "float32", "resid_post.3", 4.0)]
    for c in cells:  # both doses of the ladder read it; the single-dose cells read no ladder
        ladder = want if (c["cell"]["site"], c["cell"]["model"]) == ("resid_post.3", "m") else None
        got = claim(c["detection"], probe=None, known_positive=None, ladder=ladder,
                    bh_reject=c["detection"]["complete"]["bh_reject"])
        assert c["claim"] == got or (ladder is not None and _close(c["claim"], got, text=False))
    assert "no dose ladder" not in str(cells[0]["claim"]) and "no dose ladder" in str(cells[2]["claim"])
    # a confidence-probe cell: a detection entry (its report is scored as one) and its confidence entry
    from tamperbench.owmi.score.score import confidence_entry

    conf = [c for c in result["cells"] if c["cell"]["probe_family"] == "confidence"]
    conf_rows = [r for r in rows if r["probe_family"] == "confidence"]
    assert len(conf) == 1 and conf[0]["runs"] == len(conf_rows) == 48
    got_conf = {**conf[0]["detection"], "complete": dict(conf[0]["detection"]["complete"])}
    assert got_conf["complete"].pop("verdict")["decided_by"] == ("unadjusted at 0.05: a confidence cell is not in the "
                                                                 "BH family")
    assert got_conf == detection_entry(conf_rows, 5, 0)
    assert conf[0]["confidence"] == confidence_entry(conf_rows) and conf[0]["confidence"]["n"] == 24
    # variance: m2's pairs matched within each dtype (same pair ids at float32 and bfloat16), one entry per
    # dtype: 12 and 12; m's (one identity, keyed by its name) over its ladder and both sites: 12 + 40 + 12
    assert {k: v["pairs"] for k, v in result["variance"].items()} == {
        "m": 64, "m2 @ rev222222222 bfloat16": 12, "m2 @ rev222222222 float32": 12}
