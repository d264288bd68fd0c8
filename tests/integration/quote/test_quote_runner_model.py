"""The runner on the real embedded model: stored records are complete, re-scorable and resumable."""

import json

import pytest

from tamperbench.errors import UserError
from tamperbench.quote.items import build_prompt, items_by_id
from tamperbench.quote.runner import TABLE, QuoteRunSpec, run_quote
from tamperbench.quote.scorer import score_response

pytestmark = pytest.mark.model


class CountingBackend:
    """The real backend, with a count of generate_chat calls (to prove resume generates nothing)."""

    def __init__(self, backend):
        self._backend = backend
        self.calls = 0

    def generate_chat(self, *args, **kwargs):
        self.calls += 1
        return self._backend.generate_chat(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._backend, name)


def test_run_stores_prompt_provenance_and_verdicts_then_resumes(embedded_backend, tmp_path):
    spec = QuoteRunSpec(item_ids=["S17", "S12"], max_new_tokens=12, device="cpu")
    run_dir = tmp_path / "run"
    store = run_quote(spec, run_dir, backend=embedded_backend, progress=False)
    rows = store.rows(TABLE)
    prov = store.con.execute("SELECT id, record FROM provenance").fetchall()
    store.close()

    assert sorted((r["item_id"], r["arm"]) for r in rows) == [("S12", "plain"), ("S12", "strict"),
                                                               ("S17", "plain"), ("S17", "strict")]
    assert [p[0] for p in prov] == [embedded_backend.provenance_id]
    assert json.loads(prov[0][1])["sha256"] == embedded_backend.provenance.sha256
    items = items_by_id()
    for r in rows:
        item = items[r["item_id"]]
        messages = [{"role": "user", "content": build_prompt(item, r["arm"])}]
        assert r["prompt_text"] == embedded_backend.chat_text(messages)
        assert r["provenance_id"] == embedded_backend.provenance_id
        assert 1 <= r["n_new_tokens"] <= 12 and r["finish_reason"] in ("eos", "length")
        assert (r["temperature"], r["seed"], r["max_new_tokens"]) == (0.0, 0, 12)
        assert r["batch_size"] >= 1 and r["gold"] == item.gold and r["dirty"] == item.dirty
        again = score_response(item, r["response"])
        assert (again.category, again.sub_label, again.evidence) == (r["category"], r["sub_label"], r["evidence"])

    spy = CountingBackend(embedded_backend)
    store = run_quote(spec, run_dir, backend=spy, progress=False)
    assert store.count(TABLE) == 4
    store.close()
    assert spy.calls == 0

    with pytest.raises(UserError, match="different spec"):
        run_quote(spec.model_copy(update={"max_new_tokens": 13}), run_dir, backend=spy, progress=False)


def test_greedy_responses_repeat_exactly(embedded_backend, tmp_path):
    spec = QuoteRunSpec(item_ids=["S30"], arms=["plain"], max_new_tokens=10, device="cpu")
    a = run_quote(spec, tmp_path / "a", backend=embedded_backend, progress=False)
    b = run_quote(spec, tmp_path / "b", backend=embedded_backend, progress=False)
    ra, rb = a.rows(TABLE), b.rows(TABLE)
    a.close(), b.close()
    assert [r["response"] for r in ra] == [r["response"] for r in rb]
    assert ra[0]["key"] == rb[0]["key"]
