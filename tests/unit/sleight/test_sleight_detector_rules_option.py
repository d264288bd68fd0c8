"""``--detector-rules``: the Appendix C reading is a named option beside the reference rules.

The rule set is part of the spec and, when not the default, of every trial's key (so a run under
one rule set never resumes the other's trials); runs written before the option existed keep their
keys and stay resumable.
"""

from __future__ import annotations

import json

import pytest

from tamperbench.errors import UserError
from tamperbench.sleight.spec import build_spec
from tamperbench.sleight.records import trial_record_key
from tamperbench.store import RunStore


def spec(**kw):
    return build_spec(model="embedded", preset="quick", questions=1, words=1, **kw)


def test_default_is_the_reference_and_keeps_the_keys_runs_had_before_the_option():
    ref, app = spec(), spec(detector_rules="appendix-c")
    assert ref.detector_rules == "reference" and app.detector_rules == "appendix-c"
    k_ref = trial_record_key("pid", "q1", "Q?", "Scarf", ref)
    k_app = trial_record_key("pid", "q1", "Q?", "Scarf", app)
    assert k_ref != k_app
    # the key of a reference-rules trial is the one computed before the field existed
    from tamperbench.sleight.records import trial_spec
    assert "detector_rules" not in trial_spec("pid", "q1", "Q?", "Scarf", ref)
    assert trial_spec("pid", "q1", "Q?", "Scarf", app)["detector_rules"] == "appendix-c"


def test_bad_rules_name_the_flag():
    with pytest.raises(UserError, match="--detector-rules"):
        spec(detector_rules="loose")


def test_a_run_written_before_the_option_resumes_and_the_other_rules_are_refused(tmp_path):
    run = tmp_path / "run"
    with RunStore.open(run, spec()):
        pass
    old = json.loads((run / "spec.json").read_text())
    del old["detector_rules"]  # what a run written before the option holds
    (run / "spec.json").write_text(json.dumps(old))
    RunStore.preflight(run, spec())
    with RunStore.open(run, spec()):
        pass
    assert json.loads((run / "spec.json").read_text())["detector_rules"] == "reference"
    with pytest.raises(UserError, match=r"differs in: detector_rules"):
        RunStore.preflight(run, spec(detector_rules="appendix-c"))
