"""One stored record (Appendix D fields) from its planned key and the engine's computed result.

Why in the engine: everything a record holds but its key is what the engine computed or read --
the unit (cell, item, seed, target, effects, generations), the batch's prompt, answer and timing,
the read-out's detail and fields, the probe's text, the model's provenance -- so the engine hands
the run finished records (``Engine.records``) and the run only keys, stores and counts them.
(``run/record.py``, where this lived, still imports, with a DeprecationWarning.)"""

from __future__ import annotations

import json

from tamperbench.owmi.protocol.probes import corrupted, parse, probe_text, rubric_flag
from tamperbench.owmi.protocol.records import OwmiRun
from tamperbench.store import trial_key


def result_of(res: dict, d: dict) -> tuple:
    """A record's computed result: (prompt text, prompt ids, declared, (answer ids, answer, finish), ...)."""
    return res[(d["track"], d["probe"], d["scope"], d["condition"], d["observer_tier"])]


def build(eng, unit, k, res: dict, provenance_id: str) -> OwmiRun:
    """The record of planned key ``k`` (key, pair id, design coordinates) of ``unit``, computed by engine
    ``eng``. What this module computes comes first; then what the read-out, the probe battery and the
    task's scorer say."""
    spec = eng.spec
    key, pair_id, d = k
    item, cell, op = unit.item, unit.cell, unit.cell.op
    got = result_of(res, d)
    text, ids, declared, answer, dt = got[:5]
    toks, reply, fin = answer[:3]
    cond = d["condition"]
    model_revision = _revision(eng.b)  # the subject's: every observer tier of a cell meets in that cell (Eq. 8)
    observer_revision = _revision(dict(eng.observers)[d["observer_model"]]) if d["observer_tier"] == 2 else None
    eff = unit.effects.get(cond, {}) if cond != "observer" else {}
    gen = unit.gens.get(cond) if cond != "observer" else None
    task_out = "" if d["track"] in ("A", "B_masked") else (gen[2] if gen else None)
    task_correct = _task_score(item, task_out)
    cell_id = trial_key(dict(model=cell.model, benchmark=cell.benchmark, object=cell.obj.label, operator=op.name,
                             dose=op.dose, probe=d["probe"], track=d["track"], readout=spec.readout))[:24]
    detail = readout_detail(eng, spec, d["probe"], d["scope"] if cond != "observer" else None)
    if len(answer) > 3:  # a token-level read-out: the closed option set's scores
        from tamperbench.owmi.engine.choice import closed_set, fields

        answer_fields = fields(closed_set(d["probe"], eng.n_layers), answer[3])
    else:
        answer_fields = parsed_fields(d["probe"], reply, eng.n_layers)
    probe = got[5] if cond == "observer" else probe_text(d["probe"], person="first", n_layers=eng.n_layers)
    return OwmiRun(
        key=key, provenance_id=provenance_id, pair_id=pair_id, cell_id=cell_id, model=cell.model,
        model_revision=model_revision, observer_revision=observer_revision,
        dtype=str(eng.b.provenance.dtype), quantized=bool(eng.b.provenance.quantization),
        temperature=spec.temperature, top_p=spec.top_p,
        max_new_tokens=(0 if spec.readout == "choice" else spec.reflection_max_new_tokens if d["track"] == "C"
                        else spec.probe_max_new_tokens),
        readout=spec.readout, readout_detail=detail,
        benchmark=cell.benchmark, domain=item.domain, item_id=item.id,
        item_provenance=json.dumps(item.provenance.model_dump(mode="json"), sort_keys=True), gold_answer=item.answer,
        object_kind=cell.obj.kind, site=cell.obj.label, layer=cell.obj.layer, head=cell.obj.head,
        sae_feature=cell.obj.feature, sae_path=cell.obj.sae_path, operator=op.name, dose=op.dose,
        positions=spec.positions, when=spec.when, concept=unit.concept, seed=unit.seed, condition=cond,
        hook_scope=d["scope"], track=d["track"], probe_family=d["probe"], probe_text=probe,
        observer_tier=d["observer_tier"], observer_model=d["observer_model"], prompt_text=text, prompt_ids=ids,
        system_prompt=unit.system,
        intervened_positions=[] if cond in ("sham", "observer") else list(declared),
        task_output=task_out, task_correct=task_correct, response=reply, finish_reason=fin,
        true_category=item.domain, seconds=dt,
        random_norm=(unit.norm_unit if cond == "random_unit" else unit.eta if cond == "random_matched" else None),
        match_target_js=unit.match[0] if cond == "random_matched" and unit.match else None,
        match_achieved_js=unit.match[1] if cond == "random_matched" and unit.match else None,
        **{k: v for k, v in eff.items()}, **answer_fields)


def readout_detail(eng, spec, family: str, scope: str | None = None) -> str | None:
    """The record's read-out beyond its name (JSON): choice's forced prefix, options and scoring (and,
    under the active scope, its label: first-order leakage)."""
    if spec.readout == "choice":
        from tamperbench.owmi.engine.choice import closed_set

        return json.dumps(closed_set(family, eng.n_layers).detail(scope))
    if spec.readout == "constrained":
        g = eng.readout.grammar(family)
        return json.dumps({"readout": "constrained", **(g.provenance() if g is not None else
                                                         {"grammar": None, "note": "free text: decoded unconstrained"})})
    return None


def parsed_fields(family: str, response: str, n_layers: int) -> dict:
    got = parse(family, response, n_layers=n_layers)
    if family == "spontaneous":
        got["rubric_flag"] = rubric_flag(response)
    got["corrupted"] = corrupted(response)
    return got


def _revision(backend) -> str:
    return backend.provenance.weights_revision


def _task_score(item, out: str | None) -> float | None:
    """The item's own scoring rule (the task adapters' scorer, as ``run/spec.py``'s ``score_task``)."""
    if not out:
        return None
    from tamperbench.tasks.scoring.score import score

    return score(item, out).score
