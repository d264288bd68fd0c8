"""Spec validation and expansion: bad input is one line naming the field, before any compute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tamperbench.errors import UserError
from tamperbench.owmi.run.plan import planned_keys
from tamperbench.owmi.run.spec import load_spec, parse_spec, quick_spec

REPO = Path(__file__).resolve().parents[4]


def test_example_config_has_every_axis():
    spec = load_spec(REPO / "examples" / "owmi_full.json")
    assert {o.kind for o in spec.objects} == {"resid_pre", "resid_post", "attn_out", "mlp_out", "head", "sae_feature"}
    assert {o.name for o in spec.operators} == {"zero", "scale", "noise", "replace", "add"}
    assert set(spec.tracks) == {"A", "B_visible", "B_masked", "B_delayed", "C"}
    assert set(spec.scopes) == {"active", "lifted"} and len(spec.conditions) == 5 and spec.observer_models


def test_example_config_names_every_spec_field():
    """The full example is the reference a user copies: a field left out runs at a default nobody reads."""
    import json

    from tamperbench.owmi.run.spec import OwmiSpec

    assert set(json.loads((REPO / "examples" / "owmi_full.json").read_text())) == set(OwmiSpec.model_fields)


@pytest.mark.parametrize("patch, needle", [
    ({"operators": [{"name": "zero", "dose": 1.5}]}, "operators[0].dose"),
    ({"operators": [{"name": "scale", "dose": -2}]}, "operators[0].dose"),
    ({"operators": [{"name": "melt", "dose": 1}]}, "operators.0.name"),
    ({"temperature": 0.7}, "temperature"),
    ({"positions": "middle"}, "positions"),
    ({"tracks": ["D"]}, "tracks.0"),
    ({"conditions": ["sham"]}, "intervention"),
    ({"concepts": ["love"]}, "concept"),
    ({"objects": [{"kind": "neuron", "layer": 1}]}, "objects.0.kind"),
    ({"seeds": "x"}, "seeds"),
])
def test_bad_spec_fields_are_named(patch, needle):
    base = quick_spec().model_dump(mode="json")
    base.update(patch)
    with pytest.raises(UserError) as err:
        parse_spec(base, "cfg.json")
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_pairs_share_an_id_and_differ_only_by_condition():
    spec = quick_spec(items_per_benchmark=1)
    coords = dict(model="embedded", benchmark="builtin", object={}, operator="add", dose=1.0, item="i", seed=0,
                  positions="task", when="prefill")
    keys = planned_keys(spec, coords, ["other"])
    n_pairs = len(spec.tracks) * len(spec.probes) * len(spec.scopes)
    assert len({p for _, p, _ in keys}) == n_pairs
    assert len(keys) == n_pairs * (4 + 2)  # four model conditions + observer tiers 1 and 2
    assert len({k for k, _, _ in keys}) == len(keys)


def test_cli_bad_config_exit_2(tmp_path, tb_inprocess):
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({"objects": [{"kind": "head", "layer": 1, "head": 2}],
                               "operators": [{"name": "replace", "dose": 3}]}))
    # the console entry point in-process (tests/conftest.py): the message and the status are the point
    p = tb_inprocess("owmi", "run", "--config", str(bad), "--out", str(tmp_path / "r"), cwd=REPO)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().startswith("error:") and "operators[0].dose" in p.stderr and "Traceback" not in p.stderr
