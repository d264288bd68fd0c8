"""The choice read-out on the embedded model: every record scored (its option mass recorded) with nothing decoded,
option log-probabilities equal to a teacher-forced forward computed here independently (the
intervention applied as the generated read-out applies it), and the batched engine equal to the
one-at-a-time reference engine."""

from __future__ import annotations

import contextlib
import json
import math

import pytest

from tamperbench.owmi.engine import forward as fw
from tamperbench.owmi.engine.choice import MIN_OPTION_MASS, closed_set, tokenize
from tamperbench.owmi.run.spec import quick_spec

pytestmark = pytest.mark.model

SPEC = dict(readout="choice", scopes=["active", "lifted"], items_per_benchmark=1, tracks=["A", "B_delayed"], conditions=["intervention", "sham", "observer"],
            probes=["detection", "localization"], observer_classifier=False, calibration_steps=2, task_max_new_tokens=4)


def option_logprobs(model, prompt: list[int], options: dict[str, list[list[int]]], iv) -> dict[str, float]:
    """For each option, log sum over its variants of p(variant | prompt), teacher-forced here with plain
    transformers calls: the prompt in one forward into a fresh ``DynamicCache``, the cache repeated once per
    variant, every variant of every option fed as one batch after it, padded on the right (a causal model's
    logits at a column do not depend on later columns, so padding changes nothing a variant reads). The
    intervention is hooked as the generated read-out's prefill hooks it, at absolute positions (the prompt's
    columns, then the variants' from ``len(prompt)`` on). Independent of the engine's option-tree scoring."""
    import torch
    from transformers import DynamicCache

    from tamperbench.models.hooks import hooks

    names = [n for n, vs in options.items() for _ in vs]
    variants = [v for vs in options.values() for v in vs]
    width = max(len(v) for v in variants)
    cache, kw = DynamicCache(config=model.config), fw._cache_kw(model)  # transformers 5 renames past_key_values
    with torch.inference_mode(), (hooks(model, iv.hook_pairs()) if iv is not None else contextlib.nullcontext()):
        if iv is not None:
            iv.phase, iv.offset = "prefill", 0
        first = torch.log_softmax(model(input_ids=torch.tensor([prompt]), **{kw: cache},
                                        use_cache=True).logits[0, -1].float(), dim=-1)
        cache.batch_repeat_interleave(len(variants))
        if iv is not None:
            iv.offset = len(prompt)
        rest = torch.log_softmax(model(input_ids=torch.tensor([v + [0] * (width - len(v)) for v in variants]),
                                       **{kw: cache}, use_cache=True).logits.float(), dim=-1)
    per_row = [float(first[v[0]]) + sum(float(rest[i, j - 1, v[j]]) for j in range(1, len(v)))
               for i, v in enumerate(variants)]
    return {n: math.log(sum(math.exp(x) for x, m in zip(per_row, names) if m == n)) for n in options}


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
        options = {n: [ids for ids, k in zip(tk.seqs, tk.owner) if cs.options[k] == n]
                   for n in cs.options if n in ("yes", "no", "0", "29")}  # one- and two-digit layers
        full = len(ctx.ids) + len(tk.prefix) + max(len(v) for vs in options.values() for v in vs)
        # the active scope alters every position from the probe on (columns past a shorter variant are its
        # padding, after everything it reads); the lifted scope only the task's declared positions
        altered = ctx.declared + (list(range(ctx.split, full)) if scope == "active" else [])
        iv = eng.make_iv(unit, cond, altered, "lifted")  # prefill phase: exactly the positions listed
        want = option_logprobs(model, ctx.ids + tk.prefix, options, iv)
        assert {n: got[n] for n in options} == pytest.approx(want, abs=2e-3), fam
    obs = next(r for r in rows if (r["track"], r["probe_family"], r["condition"]) == ("A", "detection", "observer"))
    cs, tk = closed_set("detection", eng.n_layers), tokenize(tok, closed_set("detection", eng.n_layers))
    want = option_logprobs(model, obs["prompt_ids"] + tk.prefix,
                           {n: [ids for ids, k in zip(tk.seqs, tk.owner) if cs.options[k] == n] for n in ("yes", "no")},
                           None)
    assert json.loads(obs["choice_logprobs"]) == pytest.approx(want, abs=2e-3)


def test_the_check_equals_one_plain_forward_per_variant(choice_unit, embedded_backend):
    """The check above, held to the engine's one-sequence teacher-forced forward (forward.answer_logprob, no
    cache) for two hooked options of the active scope: the cached prompt and the right-padded batch change
    no log-probability."""
    eng, unit, _item, _rows = choice_unit
    model, tok = embedded_backend.model, embedded_backend.tokenizer
    ctx = eng.context(unit, "A", "localization", "intervention")
    cs = closed_set("localization", eng.n_layers)
    tk = tokenize(tok, cs)
    options = {n: [ids for ids, k in zip(tk.seqs, tk.owner) if cs.options[k] == n] for n in ("0", "29")}
    full = len(ctx.ids) + len(tk.prefix) + max(len(v) for vs in options.values() for v in vs)
    altered = ctx.declared + list(range(ctx.split, full))
    got = option_logprobs(model, ctx.ids + tk.prefix, options, eng.make_iv(unit, "intervention", altered, "lifted"))
    for n, variants in options.items():
        one_each = []
        for v in variants:
            mine = ctx.declared + list(range(ctx.split, len(ctx.ids) + len(tk.prefix) + len(v)))
            one_each.append(fw.answer_logprob(model, ctx.ids + tk.prefix, v, eng.make_iv(unit, "intervention", mine,
                                                                                        "lifted")))
        assert got[n] == pytest.approx(math.log(sum(math.exp(x) for x in one_each)), abs=1e-4), n


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
