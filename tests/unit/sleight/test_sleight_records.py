"""Trial rows store only what differs from the clean answer; the store round-trips them."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from tamperbench.errors import UserError
from tamperbench.sleight.protocol import get_preset, protocol_questions, protocol_words
from tamperbench.sleight.spec import build_spec
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE, SleightClean, SleightTrial, full_trace
from tamperbench.sleight.runner import clean_record, trial_record
from tamperbench.store import RunStore


@pytest.fixture(scope="module")
def backend(embedded_tokenizer):
    """The real SmolLM2 tokenizer with the few backend attributes the record builders read."""
    tok = embedded_tokenizer
    return SimpleNamespace(tokenizer=tok, provenance_id="p0",
                           chat_text=lambda m: tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True),
                           chat_ids=lambda m: [1, 2, 3],
                           decode=lambda ids, skip_special_tokens=True: tok.decode(
                               list(ids), skip_special_tokens=skip_special_tokens))


def _trace(ids, injected=(), swaps=(), spaceless=0):
    n = len(ids)
    return SimpleNamespace(token_ids=ids, logprobs=[-0.1 * (i + 1) for i in range(n)],
                           entropy_full=[1.0 + i for i in range(n)], entropy_top20=[0.5 + i for i in range(n)],
                           injected=[i in injected for i in range(n)], swaps=list(swaps), mentions=0,
                           spaceless=spaceless, topk_ids=None, topk_logprobs=None, finish_reason="length",
                           decode_seconds=0.25)


def test_protocol_data_is_complete():
    qs, ws = protocol_questions(), protocol_words()
    assert len(qs) == 100 and len({t for _, t in qs}) == 100 and len(ws) == 100 and len(set(ws)) == 100
    assert qs[0] == ("q000", "what is the capital of France?") and qs[-1][1] == "what is the capital of Italy?"
    assert ws[0] == "armchair" and ws[-1] == "doorstop"
    paper = get_preset("paper")
    assert len(paper.question_ids) == 100 and len(paper.substitutions) == 101 and paper.max_new_tokens == 256
    assert paper.substitutions[0] == "Mandela effect"
    assert "Mandela effect" in get_preset("quick").substitutions


def test_spec_overrides_and_errors():
    spec = build_spec(model="embedded", preset="quick", questions=6, words=5, triggers=["The", "a"])
    assert len(spec.questions) == 6 and len(spec.substitutions) == 5 and spec.triggers == ("the", "a")
    assert spec.substitutions[0] == "Mandela effect"
    for kwargs, field in [({"questions": 0}, "--questions"), ({"max_new_tokens": 0}, "--max-new-tokens"),
                          ({"preset": "nope"}, "--preset"), ({"questions": 101}, "--questions"),
                          ({"triggers": [""]}, "--trigger")]:
        with pytest.raises(UserError, match=field):
            build_spec(model="embedded", **kwargs)


@pytest.mark.model
def test_trial_row_forks_from_clean_and_round_trips(backend, tmp_path):
    tok = backend.tokenizer
    spec = build_spec(model="embedded", preset="quick", max_new_tokens=16)
    clean_ids = tok.encode("Paris is the capital of France.", add_special_tokens=False)
    k = [tok.decode([i]) for i in clean_ids].index(" the")
    repl = tok.encode(" scarf", add_special_tokens=False)
    trial_ids = clean_ids[:k] + repl + tok.encode(" of France.", add_special_tokens=False)
    swap = SimpleNamespace(position=k, trigger="the", surface=" the", n_injected=len(repl),
                           matched_clean_logprobs=[-0.5, -0.25], matched_clean_entropy_full=[1.0, 2.0],
                           matched_clean_entropy_top20=[0.5, 0.5])
    trace = _trace(trial_ids, injected=range(k, k + len(repl)), swaps=[swap])
    c = clean_record(backend, spec, "q000", "what is the capital of France?", _trace(clean_ids), "ck")
    t = trial_record(backend, spec, "q000", "what is the capital of France?", c.prompt_text, "scarf", trace,
                     clean_ids, "ck")
    assert t.fork_at == k and t.token_ids == trial_ids[k:] and t.reaction_text == "Paris is scarf of France."
    assert t.injected == list(range(k, k + len(repl))) and t.swap_positions == [k]
    assert t.matched_surprisal == [[0.5, 0.25]] and (t.occurrences, t.coverage) == (1, 1.0)
    assert not t.untouched and t.trigger == "the" and c.whole_word_occurrences == 1
    untouched = trial_record(backend, spec, "q000", "q?", c.prompt_text, "canoe", _trace(clean_ids), clean_ids, "ck")
    assert untouched.untouched and untouched.token_ids == [] and untouched.fork_at == len(clean_ids)
    assert untouched.coverage == 0.0 and untouched.occurrences == 1  # the 'the' stood: nothing was swapped
    with RunStore.open(tmp_path / "run", spec) as store:
        store.ensure_table(CLEAN_TABLE, SleightClean)
        store.ensure_table(TRIALS_TABLE, SleightTrial)
        assert store.write(CLEAN_TABLE, [c]) == 1 and store.write(TRIALS_TABLE, [t, untouched]) == 2
        crow = store.rows(CLEAN_TABLE)[0]
        rows = {r["substitution"]: r for r in store.rows(TRIALS_TABLE)}
    whole = full_trace(crow, rows["scarf"])
    assert whole.token_ids == trial_ids and whole.surprisal == pytest.approx([-x for x in trace.logprobs])
    assert rows["scarf"]["matched_surprisal"] == [[0.5, 0.25]]
    assert full_trace(crow, rows["canoe"]).token_ids == clean_ids


@pytest.mark.model
def test_tables_join_judge_verdicts(backend, tmp_path):
    """Table 1/2 judge columns are empty without verdicts and filled from judge_verdicts when present."""
    from rich.console import Console

    from tamperbench.sleight.summary import summarize
    from tamperbench.sleight.tables import render

    tok = backend.tokenizer
    spec = build_spec(model="embedded", preset="quick", max_new_tokens=16)
    clean_ids = tok.encode("Paris is the capital of the French.", add_special_tokens=False)
    texts = [tok.decode([i]) for i in clean_ids]
    k = texts.index(" the")
    c = clean_record(backend, spec, "q000", "what is the capital of France?", _trace(clean_ids), "ck")
    rows = []
    for sub in ("Mandela effect", "scarf"):
        repl = tok.encode(" " + sub, add_special_tokens=False)
        ids = clean_ids[:k] + repl + clean_ids[k + 1:]
        swap = SimpleNamespace(position=k, trigger="the", surface=" the", n_injected=len(repl),
                               matched_clean_logprobs=[-0.1] * 8, matched_clean_entropy_full=[1.0] * 8,
                               matched_clean_entropy_top20=[0.5] * 8)
        rows.append(trial_record(backend, spec, "q000", "q", c.prompt_text, sub,
                                 _trace(ids, injected=range(k, k + len(repl)), swaps=[swap]), clean_ids, "ck"))
    with RunStore.open(tmp_path / "run", spec) as store:
        store.write(CLEAN_TABLE, [c])
        store.write(TRIALS_TABLE, rows)
        before = summarize(store)[0]
        assert before["judge"]["flagged"] is None and before["touched"] == 2 and before["untouched_pct"] == 0.0
        # surprisal of token i is 0.1*(i+1): hand-check the Delta for the scarf trial
        n_inj = len(tok.encode(" scarf", add_special_tokens=False))
        n = len(clean_ids) - 1 + n_inj
        post = [0.1 * (i + 1) for i in range(k + n_inj, min(n, k + n_inj + 8))]
        clean_mean = sum(0.1 * (i + 1) for i in range(len(clean_ids))) / len(clean_ids)
        est = summarize(store)[0]["split"]["delta_surprisal_words"]
        assert est["mean"] == pytest.approx(sum(post) / len(post) - clean_mean)
        store.con.execute("CREATE TABLE judge_verdicts (trial_key VARCHAR, flagged BOOLEAN, corrected BOOLEAN, "
                          "derailed BOOLEAN, aware BOOLEAN)")
        store.con.execute("INSERT INTO judge_verdicts VALUES (?, true, true, false, false), (?, false, NULL, true, false)",
                          [rows[0].key, rows[1].key])
        after = summarize(store)[0]
        assert after["judge"]["flagged"] == 50.0 and after["judge"]["flagged_entity"] == 100.0
        assert after["judge"]["corrected"] == 100.0 and after["judge"]["ignored"] == 0.0
        assert after["split"]["flagged_gap"] == 100.0
        out = render(store, Console(file=open(os.devnull, "w")))
    # each judged rate with its n: trials with a majority on the label / trials judged (issue 27 item 4)
    assert out["tables"]["table1"]["rows"][0][1:3] == ["50 (n=2/2)", "100 (n=1/1)"]
    assert (tmp_path / "run" / "tables.md").exists()
