"""Grammar-constrained decoding (models/decoding/grammar.py, llguidance) on the real embedded model.

Short generations (<= 40 tokens): what is checked is that the grammar's mask is the grammar's
(step 0 allows only the object's opening tokens), that every constrained answer is JSON that
validates against its schema even where the free model writes code, that a grammar which allows
the free greedy path leaves the tokens unchanged, and that the step decoder, OWMI's ragged rows
and OWMI's one-row loop choose the same tokens under it.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from tamperbench.models.decoding.grammar import JsonGrammar, allowed, matcher

pytestmark = pytest.mark.model

SCHEMA = {"type": "object",
          "properties": {"answer": {"enum": ["yes", "no"]}, "sure": {"type": "boolean"},
                         "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                         "reason": {"type": "string", "maxLength": 40}},
          "required": ["answer", "sure", "confidence", "reason"], "additionalProperties": False}
CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"],
        "additionalProperties": False}
# the free model answers this one with exactly {"city": "Paris"} (checked below)
CITY_PROMPT = 'What is the capital of France? Answer in JSON like {"city": "..."}'


def _conv(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_step0_mask_allows_only_the_grammars_first_tokens(embedded_backend):
    tok = embedded_backend.tokenizer
    vocab = embedded_backend.model.config.vocab_size
    row = matcher(tok, JsonGrammar.from_schema(SCHEMA), embedded_backend.eos_ids)
    mask = allowed([row, None], vocab)
    ids = mask[0].nonzero()[:, 0].tolist()
    texts = [tok.decode([i]) for i in ids]
    # no free whitespace and the first key fixed: the object opens with '{' then '"'
    assert ids and all(t.startswith('{"') or t == "{" for t in texts), texts
    assert tok.convert_tokens_to_ids("{") in ids or any(t == '{"' for t in texts)
    for bad in ("{}", "{\n", " {", "[", "Yes"):  # tokens the model might like, all forbidden here
        bad_ids = tok.encode(bad, add_special_tokens=False)
        if len(bad_ids) == 1:
            assert not mask[0, bad_ids[0]], bad
    assert not mask[0, embedded_backend.eos_ids].any()  # the object is not complete yet
    assert bool(mask[1].all())  # a row without a grammar is untouched
    # a model vocabulary wider than the tokenizer's (padded embeddings): the extra ids are never allowed
    wide = allowed([row], vocab + 64)
    assert wide.shape == (1, vocab + 64) and not wide[0, vocab:].any() and wide[0, :vocab].equal(mask[0])


def test_constrained_answers_are_json_that_validates(embedded_backend):
    g = JsonGrammar.from_schema(SCHEMA)
    prompts = ["Is Paris in France?", "Return {\"city\": \"Rome\"}", "Write a haiku about the sea."]
    # the control: free, the model opens with prose or code here (8 tokens show it)
    free = embedded_backend.generate_chat([_conv(p) for p in prompts], max_new_tokens=8, progress=False)
    assert not any(f.text.lstrip().startswith("{") for f in free), [f.text for f in free]
    got = embedded_backend.generate_chat([_conv(p) for p in prompts], max_new_tokens=40, progress=False, grammar=g)
    for c in got:
        jsonschema.validate(json.loads(c.text), SCHEMA)
        assert c.finish_reason == "eos", c.text


def test_grammar_allowing_the_greedy_path_changes_nothing(embedded_backend):
    """Step decoder, OWMI's ragged rows and its one-row loop agree token for token with free greedy."""
    from tamperbench.owmi.engine import forward as fw
    from tamperbench.owmi.engine.ragged import Rows

    b = embedded_backend
    g = JsonGrammar.from_schema(CITY)
    (free,) = b.generate_chat([_conv(CITY_PROMPT)], max_new_tokens=20, progress=False)
    (con,) = b.generate_chat([_conv(CITY_PROMPT)], max_new_tokens=20, progress=False, grammar=g)
    assert free.text == '{"city": "Paris"}' and free.token_ids[-1] in b.eos_ids
    assert con.token_ids == free.token_ids

    # the step decoder reports when the grammar is complete: after the closing brace, then EOS
    ids = b.chat_ids(_conv(CITY_PROMPT))
    dec = b.step_decoder(capacity=2)
    r_con, r_free = dec.add_rows([ids, ids])
    dec.set_grammar(r_con, matcher(b.tokenizer, g, b.eos_ids))
    steps = []
    for _ in range(len(free.token_ids)):
        steps.append({res.row: res for res in dec.step()})
    assert [s[r_con].token for s in steps] == [s[r_free].token for s in steps] == free.token_ids
    assert [s[r_free].grammar_done for s in steps] == [None] * len(steps)
    assert [s[r_con].grammar_done for s in steps] == [False] * (len(steps) - 2) + [True, True]

    # OWMI: ragged rows (one with the grammar, one without) and the one-row loop
    rows = Rows(b.model, fw.new_cache(b.model), torch.zeros(2, 0, dtype=torch.bool), ["g", "f"])
    logits = rows.extend([ids, ids], "prefill")[:, -1]
    got = rows.greedy(logits, 20, set(b.eos_ids), "probe", grammars={"g": matcher(b.tokenizer, g, b.eos_ids)})
    assert got["g"] == got["f"] == (free.token_ids, "eos")
    cache = fw.new_cache(b.model)
    last = fw.feed(b.model, cache, ids, 0, None, "prefill")
    assert fw.greedy(b.model, cache, last, len(ids), 20, set(b.eos_ids), None, "probe",
                     grammar=matcher(b.tokenizer, g, b.eos_ids)) == (free.token_ids, "eos")


def test_grammar_steers_where_greedy_strays_and_follows_forks_and_rollbacks(embedded_backend):
    """Where the free answer is not JSON the grammar changes the tokens; a fork copies the grammar
    state, a rollback takes it back, a forbidden forced token is refused, sampling stays inside it."""
    b = embedded_backend
    g = JsonGrammar.from_schema(CITY)
    ids = b.chat_ids(_conv("Return {\"city\": \"Rome\"}"))
    dec = b.step_decoder(capacity=4)
    (rid,) = dec.add_rows([ids])
    dec.set_grammar(rid, matcher(b.tokenizer, g, b.eos_ids))
    first = dec.step()[0]
    assert b.tokenizer.decode([first.token]).startswith("{")
    (twin,) = dec.fork(rid, 1)
    a, c = (res.token for res in dec.step())
    assert a == c  # same state, same choice
    with pytest.raises(ValueError, match="not allowed by its grammar"):
        dec.step({twin: b.tokenizer.convert_tokens_to_ids("[")})
    dec.rollback(twin, 1)  # the grammar goes back one token too: the twin takes the same token again
    for _ in range(12):
        res = {r.row: r for r in dec.step()}
        if res[rid].is_eos:
            break
    steered = dec.generated(rid)
    assert dec.generated(twin) == steered[:len(dec.generated(twin))]
    jsonschema.validate(json.loads(b.decode(steered[:-1])), CITY)
    # OWMI's ragged rows and one-row loop steer the same way
    from tamperbench.owmi.engine import forward as fw
    from tamperbench.owmi.engine.ragged import Rows

    rows = Rows(b.model, fw.new_cache(b.model), torch.zeros(1, 0, dtype=torch.bool), ["g"])
    logits = rows.extend([ids], "prefill")[:, -1]
    assert rows.greedy(logits, 20, set(b.eos_ids), "probe",
                       grammars={"g": matcher(b.tokenizer, g, b.eos_ids)})["g"] == (steered, "eos")
    cache = fw.new_cache(b.model)
    last = fw.feed(b.model, cache, ids, 0, None, "prefill")
    assert fw.greedy(b.model, cache, last, len(ids), 20, set(b.eos_ids), None, "probe",
                     grammar=matcher(b.tokenizer, g, b.eos_ids)) == (steered, "eos")
    # seeded sampling at a high temperature draws only allowed tokens (pending_logprobs(constrained=True))
    outs = b.generate_chat([_conv("Say anything.")] * 3, max_new_tokens=24, temperature=1.5, seed=3,
                           progress=False, grammar=g)
    for o in outs:
        if o.finish_reason == "eos":
            jsonschema.validate(json.loads(o.text), CITY)
        else:  # out of budget inside the string: still a prefix of the grammar's language
            assert o.text.startswith('{"city": "')
