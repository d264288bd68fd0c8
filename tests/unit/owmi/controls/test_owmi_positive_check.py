"""The known-positive check (owmi known-positive --check): its run spec on held-out directions, its rows,
pass rule and leakage floor, and the claims reading it matched by model, site and read-out.

No model: score cells shaped as owmi score writes them, specs built by the real code, and anchors
saved and scored through the real RunStore and ``score_runs`` (the model path: tests/integration/
tests/integration/owmi/controls/test_owmi_anchors_model.py)."""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.owmi.controls.known_positive import KnownPositiveSpec
from tamperbench.owmi.controls.positive_check import check_disjoint, check_spec
from tamperbench.owmi.score.positive import ADAPTED, BASE, PASS_RULE, floor_lines, rows_of, table_lines, verdicts

ADAPTED_SPEC = "embedded+peft:/kp/adapter"


def _cell(model: str, readout: str, hits: int, fas: int, pairs: int = 100, auroc=(0.99, [0.95, 1.0])) -> dict:
    comp = {"pairs": pairs, "items": pairs // 2, "hit_rate": hits / pairs, "false_alarm_rate": fas / pairs,
            "margin": (hits - fas) / pairs, "margin_ci": [0.9, 1.0], "auroc": auroc[0], "auroc_ci": auroc[1],
            "dprime": 4.1, "dprime_ci": [3.5, 4.6]}
    return {"cell": {"model": model, "readout": readout, "probe_family": "detection", "site": "resid_post.15",
                     "model_revision": "r", "dtype": "float32", "quantized": True},
            "detection": {"complete": comp, "parse_rates": [{"parsed": pairs, "attempted": pairs}] * 2}}


def test_rows_judged_by_the_claims_statistic_with_the_leakage_floor_named():
    cells = [_cell(ADAPTED_SPEC, "choice", 97, 2), _cell("embedded", "choice", 0, 0, auroc=(0.951, [0.91, 0.98])),
             {"cell": {"probe_family": "confidence"}}]
    rows = rows_of({"cells": cells}, ADAPTED_SPEC)
    assert [(r["role"], r["hits"], r["false_alarms"], r["pairs"]) for r in rows] == [
        (ADAPTED, 97, 2, 100), (BASE, 0, 0, 100)]
    lines = table_lines(rows)
    assert lines[2] == (f"| {ADAPTED}: `{ADAPTED_SPEC}` | choice | 100 (50) | 97/100 | 2/100 | 0.990 [0.950, 1.000] | "
                        "4.10 [3.50, 4.60] | +0.950 [+0.900, +1.000] |")
    v = verdicts(rows)
    assert v["choice"]["passes"] is True and v["choice"]["line"].startswith("choice: PASS (meets the rule; rule: ")
    assert floor_lines(v) == ["leakage floor (choice): the unadapted model's AUROC 0.951 [0.910, 0.980] (hits 0/100, "
                              "false alarms 0/100): what the pipeline reads from the intervention with no trained report"]


@pytest.mark.parametrize("hits,fas,pairs,auroc,why,status", [
    (95, 5, 100, (0.99, [0.95, 1.0]), None, "PASS"),  # the boundary itself passes
    (94, 0, 100, (0.99, [0.95, 1.0]), "hits 94/100 below 95%", "FAIL"),
    (100, 6, 100, (0.99, [0.95, 1.0]), "false alarms 6/100 above 5%", "FAIL"),
    (100, 0, 100, (0.99, [0.9, 1.0]), "AUROC lower bound 0.900 not above 0.9", "FAIL"),
    # below the size floor alone: not a pass, and named apart from a failed threshold
    (8, 0, 8, (1.0, [1.0, 1.0]), "8 complete pairs, below the paper's 100 (every other threshold met: the rule's "
     "verdict needs >= 100 pairs)", "TOO FEW PAIRS"),
    (6, 0, 8, (1.0, [1.0, 1.0]), "8 complete pairs, below the paper's 100; hits 6/8 below 95%", "FAIL"),
])
def test_pass_rule_boundaries(hits, fas, pairs, auroc, why, status):
    v = verdicts(rows_of({"cells": [_cell(ADAPTED_SPEC, "choice", hits, fas, pairs, auroc)]}, ADAPTED_SPEC))["choice"]
    assert v["passes"] is (why is None)
    assert v["why"] == (why or "meets the rule") and PASS_RULE in v["line"]
    assert v["status"] == status and v["line"].startswith(f"choice: {status} (")


def test_check_runs_100_pairs_on_heldout_directions_disjoint_from_training(tmp_path):
    """The full preset's check: 50 anchor items x 2 seeds, one held-out direction per unit, every
    held-out direction used once and none of the 400 training directions (red if they overlap)."""
    kp = KnownPositiveSpec()
    spec = check_spec(tmp_path / "adapter", "embedded", 15, "choice", directions=kp.heldout_seeds)
    assert spec.models == (f"embedded+peft:{(tmp_path / 'adapter').resolve()}", "embedded")
    assert (spec.operators[0].name, spec.operators[0].dose, spec.positions) == ("replace", 1.0, "0,1,2")
    assert spec.scopes == ("lifted",) and spec.tracks == ("A",) and spec.probes == ("detection",)
    assert spec.conditions == ("intervention", "sham") and spec.objects[0].label.startswith("resid_post.15")
    assert spec.benchmarks == ("anchor",) and spec.items_per_benchmark == 50 and len(spec.seeds) >= 2
    used = [spec.direction_seed(i, s) for i in range(spec.items_per_benchmark) for s in spec.seeds]
    assert len(used) == len(set(used)) == 100 and set(used) == set(kp.seeds("heldout"))
    assert not set(used) & set(kp.seeds("train")) and len(kp.seeds("train")) == 400
    from tamperbench.owmi.run.spec import load_items

    items = load_items("anchor", spec.items_per_benchmark)
    assert len({it.id for it in items}) == 50 and not {it.id for it in items} & {f"anchor-1-{k}" for k in range(400)}


def test_overlapping_directions_are_refused():
    with pytest.raises(UserError, match=r"held-out directions 900000..900099 include 2 trained on"):
        check_disjoint([*range(500000, 500400), 900003, 900050], (900000, 900099))
    check_disjoint(list(range(500000, 500400)), (900000, 900099))
    from tamperbench.owmi.run.spec import parse_spec

    with pytest.raises(UserError, match="replace_directions: 0..9 holds 10 directions; one per unit needs 12"):
        parse_spec(dict(objects=[{"kind": "resid_post", "layer": 3}], operators=[{"name": "replace", "dose": 1.0}],
                        replace_directions=[0, 9], items_per_benchmark=6, seeds=[0, 1]))


def test_the_engine_writes_the_training_construction():
    """What replace writes under replace_directions is the training reference: the same seeded unit
    direction (``intervene.unit_direction``, used by training), scaled to the engine reference's norm."""
    import torch

    from tamperbench.owmi.controls.intervene import unit_direction
    from tamperbench.owmi.engine.conditions import random_direction

    for seed in (900000, 900057):
        assert torch.equal(random_direction(576, seed), unit_direction(seed, 576))


def test_cli_refuses_an_unknown_readout_before_any_model_loads(tmp_path):
    from typer.testing import CliRunner

    from tamperbench.owmi.cli import app

    res = CliRunner().invoke(app, ["known-positive", "--out", str(tmp_path / "kp"), "--check", "--readout", "bogus"])
    assert isinstance(res.exception, UserError) and "--readout: 'bogus' is not one of" in str(res.exception)
    assert not (tmp_path / "kp").exists()


def test_claims_read_the_check_matched_by_model_site_and_readout(tmp_path):
    """Cell m @ resid_post.3 (read-out generated) reads only a check of the same model, site and read-out:
    the anchor's own evaluate() result, a check under another read-out and one at another site leave
    the condition unmeasured (red when the claims read evaluate(): it passes there)."""
    from tamperbench.owmi.score.anchor_store import save_anchor, save_anchor_rows
    from tamperbench.owmi.score.claims import KP_NAME
    from tamperbench.owmi.score.profile import score_runs
    from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
    from tamperbench.store import RunStore
    from tests.unit.owmi.score.test_owmi_profile_bite import REV, _records, _Spec

    store = RunStore.open(tmp_path / "run", _Spec())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, [r for r in _records() if r.model == "m"])
    store.close()
    ident = {"model": "m", "model_revision": REV["m"], "dtype": "float32", "quantized": False}
    evaluate = {"kind": "known_positive", **ident, "site": "resid_post.3", "layer": 3, "passes": True,
                "dprime": {"estimate": 5.0}, "auroc": {"estimate": 1.0, "ci": [1.0, 1.0]}}
    save_anchor(tmp_path / "kp", _Spec(name="kp"), evaluate)
    row = {"pairs": 100, "hits": 99, "false_alarms": 0, "dprime": 4.0, "auroc": 0.999, "auroc_ci": [0.99, 1.0]}

    def check(site: str, readout: str) -> dict:
        return {"kind": "known_positive_check", **ident, "site": site, "layer": int(site.split(".")[1]),
                "readout": readout, "passes": True, "why": "meets the rule", "adapted": row,
                "leakage_floor": {"auroc": 0.7, "auroc_ci": [0.6, 0.8]}}

    def kp_lines(checks: list[dict]) -> dict:
        save_anchor_rows(tmp_path / "kp", _Spec(name="kp"), "known_positive_check", checks)
        res = score_runs([tmp_path / "run", tmp_path / "kp"], n_boot=20, dose_boot=0)
        cell = next(c for c in res["cells"] if c["cell"]["site"] == "resid_post.3" and "claim" in c)
        return {k: [x for x in cell["claim"][k] if x.startswith(KP_NAME)] for k in ("held", "failed", "not_measured")}

    got = kp_lines([check("resid_post.3", "choice"), check("resid_post.5", "generated")])
    assert got["held"] == got["failed"] == [] and got["not_measured"] == [
        f"{KP_NAME}: no known-positive check for this model, site and read-out (owmi known-positive --check --layer L "
        "--readout R)"]
    got = kp_lines([check("resid_post.3", "choice"), check("resid_post.3", "generated")])
    assert got["held"] == [f"{KP_NAME}: adapted hits 99/100, false alarms 0/100, d'=4.00, AUROC=0.999 [0.990, 1.000]; "
                           "leakage floor (unadapted AUROC) 0.700"]


def test_score_report_lists_the_check_with_its_leakage_floor():
    from tamperbench.owmi.score.render import check_line

    rows = rows_of({"cells": [_cell(ADAPTED_SPEC, "choice", 97, 2), _cell("embedded", "choice", 3, 1, auroc=(0.95, [0.9, 0.99]))]},
                   ADAPTED_SPEC)
    v = verdicts(rows)
    from tamperbench.owmi.score.positive import anchor_rows

    (a,) = anchor_rows(v, base="embedded", layer=15, directions=(900000, 900099), trained=list(range(500000, 500400)),
                       runs=["KP/run-choice"])
    assert (a["kind"], a["model"], a["site"], a["readout"], a["model_revision"], a["passes"]) == (
        "known_positive_check", "embedded", "resid_post.15", "choice", "r", True)
    assert check_line(a, "embedded @ r") == (
        "known-positive check through owmi run, embedded @ r at resid_post.15, read-out choice (held-out directions "
        "900000..900099): adapted hits 97/100, false alarms 2/100, d' = 4.10, AUROC = 0.990 [0.950, 1.000]; unadapted "
        "(leakage floor) hits 3/100, false alarms 1/100, d' = 4.10, AUROC = 0.950 [0.900, 0.990]; passes = True "
        "(meets the rule)")
