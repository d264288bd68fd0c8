"""Anchor specs refuse bad input before any model is loaded (no model mark: pure)."""

import pytest
from pydantic import ValidationError

from tamperbench.owmi.controls.known_positive import KnownPositiveSpec
from tamperbench.owmi.controls.probe import ProbeSpec, split_items
from tamperbench.owmi.controls.prompts import anchor_prompts


def test_overlapping_seed_ranges_are_refused_when_the_spec_is_built():
    with pytest.raises(ValidationError, match="overlap"):
        KnownPositiveSpec(train_seeds=(100, 200), heldout_seeds=(200, 250))
    with pytest.raises(ValidationError, match="below its start"):
        KnownPositiveSpec(train_seeds=(10, 5))
    s = KnownPositiveSpec()
    assert not set(s.seeds("train")) & set(s.seeds("heldout"))
    assert len(s.seeds("train")) == 400 and len(s.seeds("heldout")) == 100  # the source's counts


def test_probe_spec_and_item_split():
    with pytest.raises(ValidationError):
        ProbeSpec(layer=10, read_layers=[9, 12])
    train, test = split_items(96, 0.25, seed=0)
    assert len(train) == 72 and len(test) == 24 and not set(train) & set(test)  # 144 / 48 vectors


def test_anchor_prompts_are_deterministic_and_distinct():
    a = anchor_prompts(120, seed=3)
    assert a == anchor_prompts(120, seed=3)
    assert len({q for _, q in a}) == 120 and a[0][0] == "anchor-3-0"


def test_cli_refuses_bad_seed_range_in_one_line():
    from typer.testing import CliRunner

    from tamperbench.errors import UserError
    from tamperbench.owmi.cli import app

    res = CliRunner().invoke(app, ["known-positive", "--out", "/tmp/x", "--train-seeds", "5:9", "--heldout-seeds", "8:12"])
    assert isinstance(res.exception, UserError) and "overlap" in str(res.exception)


def test_structure_claim_needs_both_contrasts():
    from tamperbench.owmi.score.claims import structure_claim

    yes = {"estimable": True, "delta": {"domain": {"established": True}, "object": {"established": True}}}
    half = {"estimable": True, "delta": {"domain": {"established": True}, "object": {"established": False}}}
    assert "structure beyond seed variation" in structure_claim(yes)
    assert "unsupported (Delta_object" in structure_claim(half)
    assert "not assessable" in structure_claim({"estimable": False, "reason": "one object"})


def test_cli_preset_and_explicit_options_combine_before_any_model_loads(monkeypatch):
    """--preset test sets epochs; an explicit --epochs must override it, not collide with it."""
    from typer.testing import CliRunner

    from tamperbench.owmi.cli import known_positive as acli
    from tamperbench.owmi.cli import app

    seen = {}

    def stop(spec_cls, field, **kw):
        seen.update(kw)
        raise SystemExit(0)

    monkeypatch.setattr(acli, "build_spec", stop)
    res = CliRunner().invoke(app, ["known-positive", "--out", "/tmp/x", "--preset", "test", "--epochs", "3"])
    assert res.exit_code == 0, res.output
    assert seen["epochs"] == 3 and seen["train_seeds"] == (500000, 500011)
