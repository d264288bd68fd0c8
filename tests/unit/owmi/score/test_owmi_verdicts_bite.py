"""Two-sided detection verdicts through ``owmi score`` (issue 33, item 1), on a real run directory.

Why: a perfect detector used to be refused (zero bootstrap SE gave p = 1, so BH never rejected), an
inverted one was printed as a behavioural null, a 2- or 3-item cell licensed claim levels, and a
constant reporter got an equivalence bound from a zero SE. Each case below is a cell of one stored
``choice`` run (g = choice_g), scored by ``score_runs`` and written by ``render.save``; the verdict,
p-value, test and item count are read back from ``owmi_score.json`` as a user would.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from tamperbench.owmi.score.profile import score_runs
from tamperbench.owmi.score.render import save, to_markdown
from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.store import RunStore
from owmi_choice_rows import choice_detection_row


class _Spec(BaseModel):
    name: str = "verdicts"


# site -> (items, g under intervention, g under sham)
CELLS = {"resid_post.3": (20, 0.9, 0.1),   # perfect detector
         "resid_post.5": (20, 0.1, 0.9),   # inverted detector
         "resid_post.7": (3, 0.9, 0.1),    # tiny: perfect, but 3 items
         "resid_post.9": (20, 0.5, 0.5),   # constant reporter
         "resid_post.11": (60, None, None)}  # a null: each pair's two scores close, the larger one alternating


def _scores(i, items, gi, gs):
    if gi is not None:
        return gi, gs
    lo, hi = 0.3 + 0.4 * i / items, 0.3 + 0.4 * (i + 0.5) / items  # the null: the larger score alternates
    return (lo, hi) if i % 2 else (hi, lo)


def _records():
    out = []
    for site, (items, gi, gs) in CELLS.items():
        for i in range(items):
            pid = f"{site}-{i}"
            a, b = _scores(i, items, gi, gs)
            for cond, g in (("intervention", a), ("sham", b)):
                out.append(choice_detection_row(model="m", site=site, pair_id=pid, item=i, condition=cond, g=g))
    return out


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verdicts")
    store = RunStore.open(tmp / "run", _Spec())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, _records())
    store.close()
    result = score_runs([tmp / "run"], n_boot=200, dose_boot=0)
    paths = save(result, tmp / "score")
    data = json.loads(paths["json"].read_text())
    by_site = {c["cell"]["site"]: c for c in data["cells"] if c["cell"]["probe_family"] == "detection"}
    return by_site, to_markdown(result)


def test_a_perfect_detector_over_20_items_exceeds_sham_with_p_below_0001(scored):
    c = scored[0]["resid_post.3"]
    comp = c["detection"]["complete"]
    assert comp["auroc"] == 1.0 and comp["auroc_se"] == 0.0  # the degenerate bootstrap that used to give p = 1
    assert comp["p_value"] < 0.001 and c["claim"]["level"] >= 3
    v = comp.get("verdict") or {}
    assert v.get("name") == "exceeds_sham" and v["claim_licensed"] is True
    assert v["p_value"] is not None and v["p_value"] < 0.001 and comp["bh_q"] < 0.001
    assert v["n_items"] == 20 and "permutation" in v["test"]
    assert comp["equivalence"] == []  # a zero SE never gives an equivalence bound
    assert c["claim"]["level"] >= 3


def test_an_inverted_detector_is_named_below_sham_never_a_null(scored):
    by_site, md = scored
    c = by_site["resid_post.5"]
    assert c["claim"]["level"] not in (0, 1, 2)  # never a null, never "uninformative"
    v = c["detection"]["complete"].get("verdict") or {}
    assert v.get("name") == "below_sham" and v["p_value"] < 0.001
    assert "reports move against the intervention: a disturbance, not detection" in c["claim"]["claim"]
    assert "bounded null" not in c["claim"]["claim"]
    assert "below_sham" in md and "disturbance, not detection" in md


def test_a_3_item_cell_claims_nothing_but_keeps_its_numbers(scored):
    by_site, md = scored
    c = by_site["resid_post.7"]
    comp = c["detection"]["complete"]
    assert c["claim"]["claim"].startswith("too few items (3) for a claim")
    v = comp.get("verdict") or {}
    assert v.get("name") == "undetermined" and v.get("too_few_items") is True and v["claim_licensed"] is False
    assert c["claim"]["level"] <= 1
    assert c["claim"]["claim"].startswith("too few items (3) for a claim")
    assert comp["bh_q"] is None and comp["equivalence"] == []  # not in the BH family, no bound
    assert comp["auroc"] == 1.0 and comp["pairs"] == 3  # descriptive numbers still printed
    assert v["p_value"] == pytest.approx(0.25)  # exact: 2 of the 2^3 item flips are as extreme
    assert "too few items (3) for a claim" in md


def test_a_constant_reporter_is_undetermined_with_no_bound(scored):
    c = scored[0]["resid_post.9"]
    comp = c["detection"]["complete"]
    assert comp["equivalence"] == []  # a zero SE gave the bound |0.5 - 0.5| + z * 0 = 0 before
    v = comp.get("verdict") or {}
    assert v.get("name") == "undetermined" and "constant reporter" in v["reason"]
    assert comp["p_value_bootstrap_z"] is None
    assert c["claim"]["level"] <= 1


def test_bh_runs_over_the_cells_at_the_item_floor_only(scored):
    from statsmodels.stats.multitest import multipletests

    by_site = scored[0]
    fam = [by_site[s]["detection"]["complete"] for s in ("resid_post.11", "resid_post.3", "resid_post.5", "resid_post.9")]
    _, q, _, _ = multipletests([c["p_value"] for c in fam], method="fdr_bh")
    assert [c["bh_q"] for c in fam] == pytest.approx(list(q))
    assert by_site["resid_post.7"]["detection"]["complete"]["bh_q"] is None


def test_a_null_over_60_items_is_bounded_and_a_bounded_null_with_anchors(scored):
    from tamperbench.owmi.score.claims import claim

    c = scored[0]["resid_post.11"]
    comp = c["detection"]["complete"]
    assert comp["auroc"] == pytest.approx(0.5, abs=0.02) and comp["auroc_se"] > 0
    v = comp["verdict"]
    assert v["name"] == "bounded" and v["equivalence_p"] < 0.05 and v["claim_licensed"] is True
    assert comp["equivalence"] and comp["equivalence"][0]["bound"] < 0.10
    kp = {"kind": "known_positive_check", "passes": True, "leakage_floor": {"auroc": 0.6},  # owmi known-positive --check
          "adapted": {"pairs": 100, "hits": 100, "false_alarms": 0, "dprime": 5.15, "auroc": 1.0, "auroc_ci": [1.0, 1.0]}}
    probe = {"passes": True, "m_probe": 0.4, "layers": [{"null_quantile": 0.1}]}
    got = claim(c["detection"], probe=probe, known_positive=kp, ladder=None, bh_reject=comp["bh_reject"])
    assert got["level"] == 2 and "bounded null" in got["claim"] and "AUROC advantage below" in got["claim"]
    assert c["claim"]["level"] == 1  # without the anchors: a diagnosis only (D.5)
