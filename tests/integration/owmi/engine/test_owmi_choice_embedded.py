"""The choice read-out on the embedded model: every record scored (its option mass recorded) with nothing decoded,
option log-probabilities equal to a teacher-forced forward computed here independently (the
intervention applied as the generated read-out applies it), and the batched engine equal to the
one-at-a-time reference engine."""

from __future__ import annotations

import json
import math

import pytest

from tamperbench.owmi.engine import forward as fw
from tamperbench.owmi.engine.choice import MIN_OPTION_MASS, closed_set, tokenize
from tamperbench.owmi.run.spec import quick_spec

pytestmark = pytest.mark.model

SPEC = dict(readout="choice", scopes=["active", "lifted"], items_per_benchmark=1, tracks=["A", "B_delayed"], conditions=["intervention", "sham", "observer"],
            probes=["detection", "localization"], observer_classifier=False, calibration_steps=2, task_max_new_tokens=4)


@pytest.fixture(scope="module")
def choice_unit(embedded_backend, run_one_unit):
    return run_one_unit(embedded_backend, quick_spec(**SPEC))


def test_every_record_is_a_token_level_readout(choice_unit):
    eng, _unit, _item, rows = choice_unit
    assert len(rows) == 2 * 2 * 2 * 3  # tracks x probes x scopes x (intervention, sham, observer tier 1)
    for r in rows:
        assert (r["readout"], r["corrupted"], r["response"], r["finish_reason"], r["max_new_tokens"]) == \
            ("choice", None, "", "choice", 0)  # corrupted None: not measurable, nothing decoded
        assert r["graded"] is None and r["confidence"] is None  # no verbal quantity is filled in
        detail = json.loads(r["readout_detail"])
        cs = closed_set(r["probe_family"], eng.n_layers)
        assert detail["prefix"] == cs.prefix and detail["options"] == list(cs.options)
        # active-scope records of a hooked condition are labelled; the observer and lifted ones are not
        hooked_active = r["hook_scope"] == "active" and r["condition"] != "observer"
        assert (detail.get("label") == "first-order leakage") is hooked_active
        lps = json.loads(r["choice_logprobs"])
        assert list(lps) == list(cs.options) and all(v < 0 for v in lps.values())
        mass = sum(math.exp(v) for v in lps.values())
        assert 0 < r["choice_mass"] <= 1 + 1e-6 and r["choice_mass"] == pytest.approx(mass, rel=1e-9)
        assert r["parse_ok"] is r["choice_scorable"] is (mass >= MIN_OPTION_MASS)
        if r["probe_family"] == "detection":
            assert 0 < r["choice_g"] < 1 and r["detected"] == (r["choice_g"] > 0.5)
            assert r["choice_g"] == pytest.approx(1 / (1 + pow(2.718281828459045, lps["no"] - lps["yes"])), rel=1e-9)
        else:
            assert r["layer_report"] == int(max(lps, key=lps.get)) and r["choice_g"] is None


@pytest.mark.parametrize("cond,scope", [("intervention", "active"), ("intervention", "lifted")])
def test_option_logprobs_equal_an_independent_teacher_forced_forward(choice_unit, embedded_backend, cond, scope):
    """Track A: the probe context, the JSON prefix and each option fed in one plain forward here, the hook
    altering the task's declared positions and -- in the active scope -- every position from the probe on."""
    eng, unit, _item, rows = choice_unit
    model, tok = embedded_backend.model, embedded_backend.tokenizer
    for fam in ("detection", "localization"):
        row = next(r for r in rows if (r["track"], r["probe_family"], r["condition"], r["hook_scope"]) ==
                   ("A", fam, cond, scope))
        ctx = eng.context(unit, "A", fam, cond)
        assert row["prompt_ids"] == ctx.ids
        cs = closed_set(fam, eng.n_layers)
        tk = tokenize(tok, cs)
        got = json.loads(row["choice_logprobs"])
        # every variant (case, leading space) closed by its delimiter: yes", Yes", " yes", ...; 0}, 29}
        for name in [n for n in cs.options if n in ("yes", "no", "0", "29")]:  # one- and two-digit layers
            parts = []
            for ids, k in zip(tk.seqs, tk.owner):
                if cs.options[k] != name:
                    continue
                full = len(ctx.ids) + len(tk.prefix) + len(ids)
                altered = ctx.declared + (list(range(ctx.split, full)) if scope == "active" else [])
                iv = eng.make_iv(unit, cond, altered, "lifted")  # prefill phase: exactly the positions listed
                parts.append(fw.answer_logprob(model, ctx.ids + tk.prefix, ids, iv))
            want = math.log(sum(math.exp(x) for x in parts))
            assert got[name] == pytest.approx(want, abs=2e-3), (fam, name)
    obs = next(r for r in rows if (r["track"], r["probe_family"], r["condition"]) == ("A", "detection", "observer"))
    cs, tk = closed_set("detection", eng.n_layers), tokenize(tok, closed_set("detection", eng.n_layers))
    want = {n: math.log(sum(math.exp(fw.answer_logprob(model, obs["prompt_ids"] + tk.prefix, ids, None))
                            for ids, k in zip(tk.seqs, tk.owner) if cs.options[k] == n)) for n in ("yes", "no")}
    assert json.loads(obs["choice_logprobs"]) == pytest.approx(want, abs=2e-3)


def test_batched_and_reference_engines_agree(choice_unit, embedded_backend, run_one_unit):
    from tamperbench.owmi.engine.reference import ReferenceEngine  # the one-at-a-time engine: the oracle

    _eng, _unit, _item, ref = run_one_unit(embedded_backend, quick_spec(**{**SPEC, "probes": ["localization"]}),
                                           ReferenceEngine)
    batched = {r["key"]: r for r in choice_unit[3] if r["probe_family"] == "localization"}
    assert sorted(batched) == sorted(r["key"] for r in ref)
    for r in ref:
        b = batched[r["key"]]
        assert json.loads(r["choice_logprobs"]) == pytest.approx(json.loads(b["choice_logprobs"]), abs=2e-3), r["key"]
        assert (r["detected"], r["layer_report"]) == (b["detected"], b["layer_report"])


def test_variants_are_distinct_tokens_for_the_embedded_tokenizer(embedded_backend):
    """Why the variants are summed: to this tokenizer "yes", "Yes" and " yes" are three different tokens,
    so P(yes) read off one of them would leave the others' mass out."""
    tok = embedded_backend.tokenizer
    tk = tokenize(tok, closed_set("detection", 30))
    firsts = {ids[0] for ids in tk.seqs}
    assert len(firsts) >= 8  # yes / Yes / " yes" / " Yes" / no / No / " no" / " No" at least
    assert len(tk.seqs) == 12
    # no string is closed by a lone '"': this tokenizer writes the answer `{"changed": "yes", ...` as
    # ... ' "', 'yes', '",' so the option is the token the model writes, not yes + a rare '"' token
    quote = tok('"', add_special_tokens=False)["input_ids"]
    assert all(ids[-1:] != quote for ids in tk.seqs)
    written = tok('{"changed": "yes", "confidence": 1}', add_special_tokens=False)["input_ids"]
    assert tk.seqs[0][0] in written and tk.seqs[0] == [written[len(tk.prefix)]]
