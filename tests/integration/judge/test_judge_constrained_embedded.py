"""``judge run --constrained`` with the real embedded model (SmolLM2-135M) as the judge.

Free, this judge mostly answers in prose or continues the reply (the demo's 12 votes: 0 parsed at
the first attempt, 5 unparsed after the retry). Under the verdict grammar every vote parses at the
first attempt, each vote records the grammar it was decoded under, and the sleight notes name it.
"""

import json

import pytest

from tamperbench.judge.constrained import verdict_schema_text
from tamperbench.judge.runner import JudgeConfig, run_jury
from tamperbench.judge.samples import SAMPLES, sample_rows, write_fixture_run
from tamperbench.store import RunStore

pytestmark = pytest.mark.model


def test_constrained_jury_parses_every_vote_and_says_so(tmp_path, embedded_backend):
    import jsonschema

    samples = SAMPLES[:2]
    run = write_fixture_run(tmp_path / "run", sample_rows(samples))
    cfg = JudgeConfig(constrained=True, max_new_tokens=64)  # the demo's budget: the object must close within it
    summary = run_jury(run, ["embedded"], lambda spec: embedded_backend, cfg, show_progress=False)
    assert summary.status_counts["embedded"] == {"parsed": len(samples), "parsed_on_retry": 0, "partial": 0,
                                                 "unparsed": 0}
    schema = json.loads(verdict_schema_text())
    with RunStore.open_existing(run) as store:
        votes = store.rows("judge_votes")
        from tamperbench.sleight.summary import judge_setup
        from tamperbench.sleight.tables import notes

        lines = notes(judge_setup(store))
    for v in votes:
        jsonschema.validate(json.loads(v["raw_text"]), schema)  # the whole answer is the verdict object
        assert v["constrained"] is True and v["attempts"] == 1 and v["finish_reason"] == "eos"
        grammar = json.loads(v["grammar"]) if isinstance(v["grammar"], str) else v["grammar"]
        assert grammar["grammar_schema"] == verdict_schema_text() and grammar["grammar_library"] == "llguidance 1.9.1"
    assert any("verdicts decoded grammar-constrained to the verdict JSON schema" in line for line in lines), lines
