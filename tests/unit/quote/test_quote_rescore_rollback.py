"""``quote rescore`` updates stored verdicts in one transaction: a failure part-way leaves every row as it was.

The store is a real DuckDB run written through the real records; the failure is injected after the
UPDATE has run inside the transaction (a stand-in for a full disk or a kill at that moment).
"""

from __future__ import annotations

import contextlib

import pytest
from pydantic import BaseModel

from tamperbench.quote.items import items_by_id
from tamperbench.quote.runner import TABLE, QuoteTrial, rescore_run
from tamperbench.store import RunStore, trial_key


class _Spec(BaseModel):
    suite: str = "quote"


def _trial(item_id: str, response: str, category: str) -> QuoteTrial:
    it = items_by_id()[item_id]
    return QuoteTrial(key=trial_key({"item": item_id, "r": response}), model="m", preset=it.preset, item_id=item_id,
                      doc_id=it.doc_id, arm="plain", repeat=0, dirty=it.planted is not None, gold=it.gold,
                      instruction="", prompt_text="", n_prompt_tokens=0, response=response, n_new_tokens=0,
                      finish_reason="eos", temperature=0.0, seed=0, sample_index=0, max_new_tokens=8, batch_size=1,
                      category=category, evidence={})


def _stored(run):
    with RunStore.open_existing(run, read_only=True) as store:
        return sorted((r["item_id"], r["category"]) for r in store.rows(TABLE))


def test_rescore_failure_rolls_back_and_success_commits(tmp_path, monkeypatch):
    run = tmp_path / "run"
    gold = items_by_id()["S02"].gold
    with RunStore.open(run, _Spec()) as store:  # stale verdicts: both rows must change on rescore
        store.write(TABLE, [_trial("S02", gold, "rewritten"), _trial("S03", "nothing like it", "faithful")])
    before = _stored(run)

    real = RunStore.transaction

    @contextlib.contextmanager
    def failing(self):
        with real(self) as con:
            yield con
            raise OSError(28, "No space left on device")  # after the UPDATE ran, before COMMIT

    monkeypatch.setattr(RunStore, "transaction", failing)
    with pytest.raises(OSError):
        rescore_run(run)
    assert _stored(run) == before  # rolled back: no row half-updated
    monkeypatch.setattr(RunStore, "transaction", real)
    assert rescore_run(run) == (2, 2)
    assert _stored(run) == [("S02", "faithful"), ("S03", "rewritten")]
