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

from tamperbench.owmi.analysis.claims import claim
from tamperbench.owmi.analysis.decay import decay_contrasts
from tamperbench.owmi.analysis.score import (CELL_FIELDS, LADDER_FIELDS, _cells, confidence_entry, detection_entry,
                                             ladder_entry, load_runs, variance_entry)


def _anchor_for(anchors: list[dict], kind: str, row: dict, site: str | None) -> dict | None:
    """The anchor of ``kind`` for this model (matched on weights' provenance id, else model name)."""
    hits = [a for a in anchors if a["kind"] == kind
            and (a.get("provenance_id") == row.get("model_revision") or a.get("model") == row.get("model"))
            and (site is None or a.get("site") == site)]
    return hits[-1] if hits else None


def score_runs(paths: Sequence[str | Path], *, n_boot: int = 2000, seed: int = 0, dose_boot: int = 100,
               decay_level: float = 0.95) -> dict:
    from tamperbench.stats.dose import extraction_ratio
    from tamperbench.stats.multiple import benjamini_hochberg
    from tamperbench.stats.pairs import paired_detection

    rows, anchors, excluded = load_runs(paths)
    cells: list[dict[str, Any]] = []
    for key, rs in _cells(rows).items():
        cell = dict(zip(CELL_FIELDS, key))
        entry: dict[str, Any] = {"cell": cell, "runs": len(rs)}
        if cell["probe_family"] in ("detection", "confidence"):
            entry["detection"] = detection_entry(rs, n_boot, seed)
        entry["confidence"] = confidence_entry(rs)
        cells.append(entry)
    det_cells = [c for c in cells if c["cell"]["probe_family"] == "detection"]
    bh = benjamini_hochberg([c["detection"]["complete"]["p_value"] if c["detection"]["complete"]["p_value"] is not None
                             else float("nan") for c in det_cells])
    for c, rej, q in zip(det_cells, bh["reject"], bh["q"]):
        c["detection"]["complete"]["bh_q"], c["detection"]["complete"]["bh_reject"] = q, rej

    ladders = {}
    for key, rs in _cells([r for r in rows if r["probe_family"] == "detection"], LADDER_FIELDS).items():
        lad = ladder_entry(rs, dose_boot, seed)
        if lad is not None:
            ladders[key] = {"cell": dict(zip(LADDER_FIELDS, key)), **lad}

    for c in det_cells:
        row = c["cell"]
        probe = _anchor_for(anchors, "probe", row, row["site"])
        kp = _anchor_for(anchors, "known_positive", row, None)
        lad = ladders.get(tuple(row[f] for f in LADDER_FIELDS))
        comp = c["detection"]["complete"]
        c["claim"] = claim(c["detection"], probe=probe, known_positive=kp, ladder=lad,
                           bh_reject=comp.get("bh_reject"))
        c["rho"] = (extraction_ratio(comp["margin"], tuple(comp["margin_ci"]), probe["m_probe"])
                    if probe and comp["pairs"] else None)

    pooled = []
    det_rows = [r for r in rows if r["probe_family"] == "detection"]
    by_model = defaultdict(list)
    for r in det_rows:
        by_model[(r["model"], r["model_revision"], r["dtype"])].append(r)
    for (m, rev, dt), rs in sorted(by_model.items()):
        pooled.append({"pool": f"{m} [{rev[:12]}, {dt}] all detection cells", **detection_entry(rs, n_boot, seed)})
    if len(by_model) > 1:
        # a pair id names a design point, not the weights: two revisions or dtypes of one model spec share them,
        # so pairs are matched within each (model, revision, dtype) before the rows are pooled
        pool_rows = [{**r, "pair_id": f"{k}|{r['pair_id']}"} for k, rs in sorted(by_model.items()) for r in rs]
        pooled.append({"pool": "all models (mixed precision pooled only if dtypes agree)",
                       **detection_entry(pool_rows, n_boot, seed)})

    pairs_by_model: dict[str, list[dict]] = defaultdict(list)
    for key, rs in _cells(det_rows, ("model", "model_revision", "dtype")).items():
        p = paired_detection([r for r in rs if r["condition"] in ("intervention", "sham")])
        ints = {r["pair_id"]: r for r in rs if r["condition"] == "intervention"}
        for pid, ga, gb in zip(p["pair_ids"], p["g_a"], p["g_b"]):
            r = ints[pid]
            pairs_by_model[key[0]].append({"s": ga - gb, "domain": r["domain"], "object": r["site"],
                                           "item": r["item_id"], "seed": r["seed"]})
    return {"runs": [str(p) for p in paths], "n_rows": len(rows), "excluded_runs": excluded, "cells": cells,
            "pooled": pooled, "bh": bh, "ladders": list(ladders.values()),
            "variance": variance_entry(dict(pairs_by_model)), "anchors": anchors,
            "decay": decay_contrasts(rows, n_boot=n_boot, seed=seed, level=decay_level)}
