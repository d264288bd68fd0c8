"""A sampled Exact Words answer is seeded by its trial (``sample_seed="trial"``): the run's seed and the
trial's item, arm and repeat. WHY: seeded by its place in its decoding call (the rule before), an answer
changed with the items asked beside it (`--items S04,S20,S32` sampled 18 of 18 answers other than the
full run's) and with the call size, which free memory decides. Runs sampled under the old rule resume
only under it (``--sample-seed position``), never half and half. On the real embedded model."""

from __future__ import annotations

import json

import pytest

from tamperbench.errors import UserError
from tamperbench.quote.runner import TABLE, QuoteRunSpec, run_quote

pytestmark = pytest.mark.model

SAMPLED = {"sampling": "paper", "repeats": 1, "max_new_tokens": 8, "device": "cpu"}


def _answers(embedded_backend, out, **kw) -> dict[tuple, tuple]:
    store = run_quote(QuoteRunSpec(**{**SAMPLED, **kw}), out, backend=embedded_backend, progress=False)
    try:
        return {(r["item_id"], r["arm"], r["repeat"]): (r["response"], r["seed"], r["sample_seed"], r["key"])
                for r in store.rows(TABLE)}
    finally:
        store.close()


def test_a_subset_and_another_call_size_sample_the_full_runs_answers(embedded_backend, tmp_path):
    """Each trial alone in its call (``batch_size=1``) in both runs, so the float sums are the same and the
    seed is all that could differ: the subset's answers are the full run's. Decoded in calls of other sizes
    (the default), each trial keeps its seed; its text can still part ways at a near tie, where other batch
    shapes sum in another order (14 of 18 identical on the results run, docs/reproducing.md)."""
    full = _answers(embedded_backend, tmp_path / "full", item_ids=["S04", "S20"], batch_size=1)
    alone = _answers(embedded_backend, tmp_path / "alone", item_ids=["S20"], batch_size=1)
    assert len(full) == 4 and len(alone) == 2
    assert all(alone[k] == full[k] for k in alone)  # text, seed, rule and key
    assert len({v[1] for v in full.values()}) == 4  # every trial draws from its own seed
    assert {v[2] for v in full.values()} == {"trial"}
    batched = _answers(embedded_backend, tmp_path / "batched", item_ids=["S04", "S20"])
    assert {k: v[1:] for k, v in batched.items()} == {k: v[1:] for k, v in full.items()}  # seeds and keys
    # the rule before: the same trials seeded by place in the call, and saying so
    old = _answers(embedded_backend, tmp_path / "old", item_ids=["S20"], sample_seed="position")
    assert {v[2] for v in old.values()} == {"position"} and {v[1] for v in old.values()} == {0}  # the repeat's
    assert not {v[3] for v in old.values()} & {v[3] for v in full.values()}  # other trials, other keys


def _as_if_made_before_the_option(out) -> None:
    spec = json.loads((out / "spec.json").read_text())
    del spec["sample_seed"]
    (out / "spec.json").write_text(json.dumps(spec))


def test_a_run_sampled_before_the_option_resumes_only_under_its_own_rule(embedded_backend, tmp_path, tb_inprocess):
    out = tmp_path / "run"
    first = _answers(embedded_backend, out, item_ids=["S20"], sample_seed="position")
    _as_if_made_before_the_option(out)
    common = ["quote", "run", "--sampling", "paper", "--max-new-tokens", "8", "--items", "S20",
              "--device", "cpu", "--out", out]
    refused = tb_inprocess(*common)
    assert refused.returncode == 2
    [line] = refused.stderr.strip().splitlines()
    assert "differs in: sample_seed" in line and "resume it with --sample-seed position" in line
    resumed = tb_inprocess(*common, "--sample-seed", "position")
    assert resumed.returncode == 0, resumed.stderr
    assert "nothing to do" in resumed.stderr  # every stored trial kept: the old keys are the old rule's
    assert len(first) == 2


def test_a_greedy_run_made_before_the_option_resumes_as_it_was(embedded_backend, tmp_path):
    out = tmp_path / "run"
    spec = QuoteRunSpec(item_ids=["S20"], max_new_tokens=8, device="cpu")
    assert spec.sample_seed is None  # greedy draws nothing: no rule to record
    run_quote(spec, out, backend=embedded_backend, progress=False).close()
    _as_if_made_before_the_option(out)
    with pytest.raises(UserError, match="differs in: item_ids"):  # another spec is still refused, as before
        run_quote(QuoteRunSpec(item_ids=["S04"], max_new_tokens=8, device="cpu"), out, backend=embedded_backend,
                  progress=False)
    again = run_quote(spec, out, backend=embedded_backend, progress=False)
    assert again.count(TABLE) == 2
    again.close()
