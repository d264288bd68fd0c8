"""The known-positive check's table and verdict, from score cells shaped as owmi score writes them."""

from __future__ import annotations

from tamperbench.owmi.analysis.positive_check import check_spec, rows_of, table_lines, verdict

ADAPTED = "embedded+peft:/kp/adapter"


def _cell(model: str, readout: str, margin: float, ci: list[float], pairs: int = 9) -> dict:
    comp = {"pairs": pairs, "items": 9, "hit_rate": 1.0 if margin > 0 else 0.0, "false_alarm_rate": 0.0,
            "margin": margin, "margin_ci": ci, "auroc": 0.5 + margin / 2, "auroc_ci": [0.5, 1.0]}
    return {"cell": {"model": model, "readout": readout, "probe_family": "detection"},
            "detection": {"complete": comp, "parse_rates": [{"parsed": 9, "attempted": 9}, {"parsed": 9, "attempted": 9}]}}


def test_pass_needs_adapted_above_zero_and_base_containing_zero_under_choice():
    cells = [_cell(ADAPTED, "choice", 1.0, [1.0, 1.0]), _cell("embedded", "choice", 0.0, [-0.11, 0.22]),
             _cell(ADAPTED, "generated", 0.0, [0.0, 0.0], pairs=0), {"cell": {"probe_family": "confidence"}}]
    rows = rows_of({"cells": cells}, ADAPTED)
    assert [(r["readout"], r["role"], r["interval"]) for r in rows] == [
        ("generated", "adapted (known positive)", "no complete pair"),
        ("choice", "adapted (known positive)", "above 0"), ("choice", "unadapted base", "contains 0")]
    assert "| generated | 0 (9) | 18/18 | +0.000 | +0.000 | n/a | n/a | no complete pair |" in table_lines(rows)[2]
    ok, line = verdict(rows)
    assert ok and line.startswith("PASS: under the choice read-out the adapted model's margin interval is above 0 "
                                  "and the unadapted model's contains 0")
    assert "| adapted (known positive): `embedded+peft:/kp/adapter` | choice | 9 (9) | 18/18 | +1.000 | +0.000 | " \
           "+1.000 [+1.000, +1.000] | 1.000 [0.500, 1.000] | above 0 |" in table_lines(rows)


def test_fail_when_the_base_also_moves_or_the_adapted_does_not():
    base_moves = rows_of({"cells": [_cell(ADAPTED, "choice", 1.0, [1.0, 1.0]),
                                    _cell("embedded", "choice", 0.4, [0.1, 0.7])]}, ADAPTED)
    assert verdict(base_moves) == (False, "FAIL: under the choice read-out the adapted model's margin interval is above 0 "
                                          "and the unadapted model's above 0 (pass: above 0, and contains 0)")
    flat = rows_of({"cells": [_cell(ADAPTED, "choice", 0.1, [-0.1, 0.3]), _cell("embedded", "choice", 0.0, [0, 0])]},
                   ADAPTED)
    assert verdict(flat)[0] is False
    assert verdict(rows_of({"cells": [_cell(ADAPTED, "generated", 1.0, [1.0, 1.0])]}, ADAPTED))[1].startswith(
        "not decided")


def test_check_spec_is_section_7_2_for_both_models(tmp_path):
    spec = check_spec(tmp_path / "adapter", "embedded", 15, "generated", items=9, seeds=(0,), probe_tokens=24)
    assert spec.models == (f"embedded+peft:{(tmp_path / 'adapter').resolve()}", "embedded")
    assert (spec.operators[0].name, spec.operators[0].dose, spec.positions) == ("replace", 1.0, "0,1,2")
    assert spec.scopes == ("lifted",) and spec.tracks == ("A",) and spec.probes == ("detection",)
    assert spec.conditions == ("intervention", "sham") and spec.objects[0].label.startswith("resid_post.15")


def test_cli_refuses_an_unknown_readout_before_any_model_loads(tmp_path):
    from typer.testing import CliRunner

    from tamperbench.errors import UserError
    from tamperbench.owmi.cli import app

    res = CliRunner().invoke(app, ["known-positive", "--out", str(tmp_path / "kp"), "--check", "--readout", "bogus"])
    assert isinstance(res.exception, UserError) and "--readout: 'bogus' is not one of" in str(res.exception)
    assert not (tmp_path / "kp").exists()
