"""The run directories a user has must resume unchanged after the suite contract moved the run specs
(``sleight/presets.py`` -> ``sleight/spec.py``, ``quote/runner.py`` -> ``quote/spec.py``): for the same
options, the ``spec.json`` a run stores is byte for byte the one stored before the move.

The golden files in data/ were written by the code before the move (commit 8da34f1) with the options
below; ``sleight_paper_embedded.json`` is the spec.json of a real long Sleight of Word run
(``sleight run --preset paper --model embedded``), which must resume from it. Real store, no model.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tamperbench.errors import UserError
from tamperbench.quote.runner import SUITE as QUOTE
from tamperbench.quote.spec import QuoteRunSpec
from tamperbench.sleight.spec import build_spec
from tamperbench.spec_base import build_spec as build_flags
from tamperbench.store import RunStore

DATA = Path(__file__).with_name("data")

CASES = {
    "sleight_paper_embedded": lambda: build_spec(model="embedded", preset="paper"),
    "sleight_quick_options": lambda: build_spec(
        model="embedded", preset="quick", questions=6, words=5, triggers=["The", "a"], max_new_tokens=40, keep_topk=True,
        seed=3, batch_size=4, detector_rules="appendix-c", replacement_case="pattern"),
    # as the run prepares it (the driver's prepare hook: the data hash)
    "quote_default": lambda: QUOTE.prepare(QuoteRunSpec()),
    "quote_options": lambda: QUOTE.prepare(build_flags(
        QuoteRunSpec, model="embedded", preset="depth", arms=["strict"], sampling="paper", repeats=2, temperature=0.7,
        seed=5, max_new_tokens=50, batch_size=3, item_ids=None)),
}


# fields added to a spec after the golden files were written, with what the golden options give them: the
# stored spec is the golden file plus these, in the same canonical form (sorted keys, two-space indent)
ADDED_SINCE = {"quote_default": {"sample_seed": None}, "quote_options": {"sample_seed": "trial"}}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_run_stores_the_same_spec_bytes_as_before_the_move(tmp_path, name):
    RunStore.open(tmp_path / "run", CASES[name]()).close()
    golden = json.loads((DATA / f"{name}.json").read_text())
    expected = json.dumps({**golden, **ADDED_SINCE.get(name, {})}, indent=2, sort_keys=True)
    assert (tmp_path / "run" / "spec.json").read_text() == expected


@pytest.mark.parametrize("name", sorted(ADDED_SINCE))
def test_a_run_made_before_a_field_was_added_resumes_or_says_how(tmp_path, name):
    """The golden spec.json is a run made before ``sample_seed``: the greedy one resumes as it is; the sampled one
    seeded by position, so only ``sample_seed="position"`` resumes it, and the refusal says so."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(DATA / f"{name}.json", run / "spec.json")
    spec = CASES[name]()
    if spec.sample_seed is None:
        RunStore.preflight(run, spec)
        return
    with pytest.raises(UserError, match="resume it with --sample-seed position"):
        RunStore.preflight(run, spec)
    RunStore.preflight(run, spec.model_copy(update={"sample_seed": "position"}))


def test_the_stored_paper_run_passes_the_resume_check(tmp_path):
    """What ``sleight run`` checks before loading the model: the stored spec is this spec."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(DATA / "sleight_paper_embedded.json", run / "spec.json")
    RunStore.preflight(run, CASES["sleight_paper_embedded"]())  # raises (one line) on any difference
