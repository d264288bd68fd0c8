"""The whole score of a set of runs: cells, pooled rows, BH, ladders, variance, anchors, claims.

The reportability profile of a cell is the vector (d', AUROC, mu_rand, mu_obs) of Eq. 9, shown
per model and cell and never collapsed into one number (Section 3.4: nothing in the data says how
to weight its parts). Pooled rows exist for the detection table only and are labelled as pools.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tamperbench.owmi.score import identity
from tamperbench.owmi.score.claims import claim
from tamperbench.owmi.score.closedset import FAMILIES, closedset_entry
from tamperbench.owmi.score.damage import corruption, damage_key, task_damage
from tamperbench.owmi.score.probe_match import anchor_intervention, other_probe_note, reads_cell
from tamperbench.owmi.score.decay import decay_contrasts
from tamperbench.owmi.score.score import (CELL_FIELDS, LADDER_FIELDS, group_cells, confidence_entry, detection_entry,
                                             readout_entry,
                                             ladder_entry, load_runs, variance_entry)


def _anchor_for(anchors: list[dict], kind: str, row: dict, site: str | None, idents: set[tuple]) -> dict | None:
    """The anchor of ``kind`` fitted on this cell's weights (``identity.of``), at ``site`` when given.

    Why identity and not name: one name can be run at float32 and bfloat16, at two revisions, or as a
    dequantized GGUF; a probe fitted on one set of weights says nothing certain about another, and
    rho = margin / m_probe would divide one precision's margin by another's probe margin. So an
    anchor that records its weights (model, model_revision, dtype, quantized) attaches only to a cell
    with the same identity. An anchor written before it recorded them (any of model_revision, dtype,
    quantized missing) cannot be placed: it attaches by name only where the run set ``idents`` holds
    exactly one identity under that name (the anchor then cannot have been meant for another), and the
    returned copy says ``identity_matched: False`` so the claim can say the match is by name; with two
    or more identities under the name the cell gets no such anchor rather than a guessed one. The
    last matching anchor wins (a later anchor run supersedes an earlier one). The input dicts are never
    modified (``result["anchors"]`` lists them as read).
    """
    cell = identity.of(row)
    one_under_name = sum(1 for i in idents if i[0] == row.get("model")) == 1
    hits = []
    for a in anchors:
        if a["kind"] != kind or (site is not None and a.get("site") != site):
            continue
        if all(f in a for f in identity.FIELDS):
            if identity.of(a) == cell:
                hits.append({**a, "identity_matched": True})
        elif a.get("model") == row.get("model") and one_under_name:
            hits.append({**a, "identity_matched": False})
    return hits[-1] if hits else None


def _precision(dtype: str, quantized: bool) -> str:
    return f"{dtype}, {'quantized' if quantized else 'full precision'}"


def readout_tag(readout: str) -> str:
    """What a pool or model-level label adds for its read-out: nothing for ``generated`` (the labels runs
    have always had), else e.g. ", choice read-out (token-level)"."""
    if readout == "generated":
        return ""
    return f", {readout} read-out" + (" (token-level)" if readout == "choice" else "")


def _pools(det_rows: list[dict], n_boot: int, seed: int) -> tuple[list[dict], dict]:
    """The labelled pools of the detection table, and why each all-models pool was or was not formed.

    One pool per model weights (model, revision, dtype, quantized). The all-models pool is formed
    per precision (dtype and quantized flag) over the weights that share it, and only where two or
    more do (one would repeat its per-model row); runs of different precision are never pooled into
    one d' (Appendix D.4: "Quantized and full-precision runs are not pooled"). Why not one pool
    over every run: a leaderboard reader sees a single d' and cannot tell that float32 and bfloat16
    (or a dequantized GGUF and full-precision) runs of different models were mixed, so a precision
    change would masquerade as a difference between models. The returned note names the
    precisions found, the pools formed and, in ``reason``, why no pool spans them all.
    A pair id names a design point, not the weights: two revisions or dtypes of one model spec share
    them, so pairs are matched within each model's weights before their rows are pooled. The
    revision shows 12 characters, more where two revisions share those (``identity.rev_chars``).
    """
    by_model: dict[tuple, list[dict]] = defaultdict(list)
    for r in det_rows:  # one pool per weights and read-out: a verbal and a token-level read-out are never pooled
        by_model[(*identity.of(r), identity.readout(r))].append(r)
    pooled = []
    n = identity.rev_chars(k[1] for k in by_model)
    for (m, rev, dt, q, ro), rs in sorted(by_model.items()):
        pooled.append({"pool": f"{m} [{rev[:n]}, {dt}{', quantized' if q else ''}{readout_tag(ro)}] all detection cells",
                       "readout": ro, **detection_entry(rs, n_boot, seed)})
    by_precision: dict[tuple, list[tuple]] = defaultdict(list)
    for k in sorted(by_model):
        by_precision[(k[2], k[3], k[4])].append(k)
    formed = []
    for (dt, q, ro), keys in sorted(by_precision.items()):
        if len(keys) < 2:
            continue
        label = f"all models [{_precision(dt, q)}{readout_tag(ro)}]"
        pool_rows = [{**r, "pair_id": f"{k}|{r['pair_id']}"} for k in keys for r in by_model[k]]
        pooled.append({"pool": label, "readout": ro, **detection_entry(pool_rows, n_boot, seed)})
        formed.append(label)
    found = [{"dtype": dt, "quantized": q, "model_weights": len(keys), **({"readout": ro} if ro != "generated" else {})}
             for (dt, q, ro), keys in sorted(by_precision.items())]
    names = "; ".join(f"{_precision(f['dtype'], f['quantized'])}{readout_tag(f.get('readout', 'generated'))}: "
                      f"{f['model_weights']} model revision{'s' if f['model_weights'] != 1 else ''}" for f in found)
    if not by_model:
        reason = "no detection rows"
    elif len(by_model) < 2:
        reason = "one model's weights only: its per-model pool is the whole pool"
    elif len(found) > 1:
        reason = (f"runs at {len(found)} precisions ({names}) are not pooled into one d' (Appendix D.4: quantized and "
                  "full-precision runs are not pooled; a precision change would read as a model difference); "
                  + ("one all-models pool per precision holding two or more model weights" if formed
                     else "no precision holds two model weights, so each model has its own pool only"))
    else:
        reason = f"every run at one precision ({names})"
    return pooled, {"formed": formed, "precisions": found, "reason": reason}


def score_runs(paths: Sequence[str | Path], *, n_boot: int = 2000, seed: int = 0, dose_boot: int = 100,
               decay_level: float = 0.95, recon_validation: dict | None = None) -> dict:
    """Score every cell. ``recon_validation``: a human validation of the reconstruction rule
    (``claims.validation_passes``); without one no cell's claim rests on reconstruction (D.3)."""
    from tamperbench.owmi.score import reconstruction as rc
    from tamperbench.owmi.score.claims import exceeds_sham
    from tamperbench.stats.dose import extraction_ratio

    rows, anchors, excluded = load_runs(paths)
    cells: list[dict[str, Any]] = []
    for key, rs in group_cells(rows).items():
        cell = dict(zip(CELL_FIELDS, key))
        entry: dict[str, Any] = {"cell": cell, "runs": len(rs), "readout": readout_entry(cell["readout"])}
        if cell["operator"] == "add":  # the concepts the cell injected: what its own probe must read (C.8)
            entry["concepts"] = sorted({r["concept"] for r in rs if r["condition"] == "intervention" and r.get("concept")})
        if cell["probe_family"] in ("detection", "confidence"):
            entry["detection"] = detection_entry(rs, n_boot, seed)
            entry["corruption"] = corruption(rs, n_boot, seed)  # D.4: rates, and discrimination without them
        if cell["probe_family"] == "reconstruction":
            entry["reconstruction"] = rc.reconstruction_entry(rs, n_boot, seed)
        if cell["probe_family"] in FAMILIES:  # Section 3.2: localization / characterization accuracy
            entry["closed_set"] = closedset_entry(cell["probe_family"], rs, n_boot, seed)
        entry["confidence"] = confidence_entry(rs)
        cells.append(entry)
    det_cells = [c for c in cells if c["cell"]["probe_family"] == "detection"]
    from tamperbench.owmi.score import verdict

    det_rows = [r for r in rows if r["probe_family"] == "detection"]
    pooled, all_models = _pools(det_rows, n_boot, seed)
    bh = verdict.apply(det_cells, pooled, [c for c in cells if c["cell"]["probe_family"] == "confidence"])  # BH over the cells at the item floor; every verdict (verdict.py)

    ladders = {}
    for key, rs in group_cells([r for r in rows if r["probe_family"] == "detection"], LADDER_FIELDS).items():
        lad = ladder_entry(rs, dose_boot, seed)
        if lad is not None:
            ladders[key] = {"cell": dict(zip(LADDER_FIELDS, key)), **lad}

    damages = task_damage(rows, n_boot, seed)  # Eq. 20, per weights x benchmark x site x operator x dose
    for c in cells:
        if "detection" in c:
            c["task_damage"] = damages.get(damage_key(c["cell"]))
    recon_cells = {rc.joint_key(c["cell"]): c for c in cells if "reconstruction" in c}
    idents = {identity.of(r) for r in rows}
    for c in det_cells:
        row = c["cell"]
        own = [a for a in anchors if a["kind"] != "probe" or reads_cell(anchor_intervention(a), c)]  # C.8
        probe = _anchor_for(own, "probe", row, row["site"], idents)
        probe_note = None if probe else other_probe_note(c, _anchor_for(anchors, "probe", row, row["site"], idents))
        kp = _anchor_for([a for a in anchors if a.get("readout") == row.get("readout")], "known_positive_check",
                         row, row["site"], idents)  # the check through owmi run, this model, site and read-out
        lad = ladders.get(tuple(row[f] for f in LADDER_FIELDS))
        comp = c["detection"]["complete"]
        rcell = recon_cells.get(rc.joint_key(row))
        c["claim"] = claim(c["detection"], probe=probe, known_positive=kp, ladder=lad,
                           bh_reject=comp.get("bh_reject"), recon=rcell and rcell["reconstruction"],
                           recon_validation=recon_validation, damage=c["task_damage"], probe_note=probe_note)
        if rcell is not None:  # Eq. 17 lives on the reconstruction cell, beside its margins
            rcell["eq17"] = rc.eq17(c["detection"], rcell["reconstruction"],
                                    exceeds_sham(c["detection"], comp.get("bh_reject")))
        c["rho"] = (extraction_ratio(comp["margin"], tuple(comp["margin_ci"]), probe["m_probe"])
                    if probe and comp["pairs"] else None)

    from tamperbench.owmi.score.dose_damage import dose_tables

    damage_by_dose = dose_tables(cells)  # Eq. 20 / D.5: margin against damage across doses
    decay = decay_contrasts(rows, n_boot=n_boot, seed=seed, level=decay_level)
    variance, model_claims = _model_level(rows, det_rows, decay)
    return {"runs": [str(p) for p in paths], "n_rows": len(rows), "excluded_runs": excluded, "cells": cells,
            "pooled": pooled, "all_models_pool": all_models, "bh": bh, "damage_by_dose": damage_by_dose, "ladders": list(ladders.values()),
            "variance": variance, "anchors": anchors, "decay": decay, "model_claims": model_claims,
            "reconstruction": {"rule": rc.RULE, "paper": rc.PAPER, "human_validation": recon_validation},
            "readouts": sorted({identity.readout(r) for r in rows})}


def _model_level(rows: list[dict], det_rows: list[dict], decay: dict) -> tuple[dict, list[dict]]:
    """Variance components and model-level claim lines, one per model identity (``identity.of``).

    Why per identity and not per name: a float32 and a bfloat16 run of one model (or two revisions,
    or a dequantized GGUF beside full precision) are different weights at different precision, and
    their variance pairs must not be pooled (Appendix D.4), nor their decay verdicts counted
    together. ``variance`` keeps its JSON keys for a name run under one identity (``identity.keys``);
    each entry and each claim line carries the identity's fields and label, so a leaderboard joins
    on (model, model_revision, dtype, quantized) rather than on a display string. A pair id names a
    design point, not the weights, so pairs are matched within one identity's rows.
    """
    from tamperbench.owmi.score.claims import structure_claim
    from tamperbench.owmi.score.decay import decay_summary
    from tamperbench.stats.pairs import paired_detection

    idents = [identity.of(r) for r in rows]
    labels, keys = identity.labels(idents), identity.keys(idents)
    by_ident: dict[tuple, list[dict]] = defaultdict(list)
    for r in det_rows:  # per identity and read-out (a verbal and a token-level read-out are never pooled)
        by_ident[(identity.of(r), identity.readout(r))].append(r)
    pairs: dict[tuple, list[dict]] = defaultdict(list)
    for ident, rs in sorted(by_ident.items()):  # fields required for analysis (records.REQUIRED): strings, a bool
        p = paired_detection([r for r in rs if r["condition"] in ("intervention", "sham")])
        design = {r["pair_id"]: r for r in rs}  # every row of a pair shares its domain, site, item and seed
        for pid, ga, gb in zip(p["pair_ids"], p["g_a"], p["g_b"]):
            r = design[pid]
            pairs[ident].append({"s": ga - gb, "domain": r["domain"], "object": r["site"], "item": r["item_id"],
                                 "seed": r["seed"]})

    def key(i: tuple, ro: str) -> str:  # a generated entry keeps the key it always had
        return keys[i] if ro == "generated" else f"{keys[i]} · {ro} read-out"

    est = variance_entry({key(*k): ps for k, ps in pairs.items()})
    variance = {key(*k): {**identity.fields(k[0]), "readout": k[1], "label": labels[k[0]] + readout_tag(k[1]),
                          **est[key(*k)]} for k in pairs}
    decay_ids = [(identity.of(c["cell"]), identity.readout(c["cell"])) for c in decay["cells"]]
    claims = [{**identity.fields(i), "readout": ro, "label": labels[i] + readout_tag(ro),
               "structure": structure_claim(variance[key(i, ro)] if (i, ro) in pairs else {}),
               "decay": decay_summary({**decay, "cells": [c for c in decay["cells"] if identity.readout(c["cell"]) == ro]},
                                      i)} for i, ro in dict.fromkeys([*pairs, *decay_ids])]
    return variance, claims
