"""The two-sided detection verdict of one cell (Sections 3.4-3.5, D.3-D.5): one of four names.

* ``exceeds_sham``: the item-level permutation test rejects AUROC = 0.5 after Benjamini-Hochberg
  and the clustered-bootstrap AUROC interval lies above 0.5.
* ``below_sham``: the same test rejects and the interval lies below 0.5. Printed as "reports move
  against the intervention: a disturbance, not detection". An inverted detector is never a null.
* ``bounded``: no rejection, and the TOST equivalence test (bootstrap SE > 0) bounds the AUROC
  within 0.5 +/- ``EQUIVALENCE_MARGIN`` at ``EQUIVALENCE_ALPHA``: the bounded null of D.5.
* ``undetermined``: anything else, with the reason: no scorable pair; too few items (fewer than
  ``ITEM_FLOOR`` distinct items: the cell says "too few items (n) for a claim" and keeps its
  descriptive numbers); a constant reporter (every score identical, so the instrument did not vary);
  a degenerate bootstrap (SE 0: no equivalence bound is read from it); or neither test decides.

The p-value behind the verdict is the exact (or Monte Carlo) paired sign-flip permutation test over
item clusters (``stats.permutation``), never a normal approximation on a bootstrap SE: with few items
that SE is degenerate (0 for a perfect detector, which gives p = 1) or too small (q = 9.2e-27
from 9 items). The normal approximation stays in the output as ``p_value_bootstrap_z`` (None where SE = 0), for comparison only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

ITEM_FLOOR = 10  # distinct items a cell needs before any claim beyond a diagnosis
EQUIVALENCE_MARGIN = 0.10  # AUROC within 0.5 +/- this margin counts as bounded (TOST)
EQUIVALENCE_ALPHA = 0.05
VERDICTS = {
    "exceeds_sham": "detection exceeds paired sham",
    "below_sham": "reports move against the intervention: a disturbance, not detection",
    "bounded": "bounded by the equivalence test",
    "undetermined": "undetermined",
}


def too_few(n: int) -> str:
    return f"too few items ({n}) for a claim (floor: {ITEM_FLOOR} distinct items); descriptive numbers only"


def constant_reporter(det: dict) -> bool:
    """Every complete-pair score identical (``detection_entry`` records ``score_levels``)."""
    return det.get("score_levels") == 1


def verdict(c: dict, reject: bool | None, *, by: str) -> dict:
    """The verdict of one complete-coding entry ``c`` given the multiplicity decision ``reject``
    (BH across cells; ``by`` names it). Pure: reads ``pairs, items, auroc, auroc_ci, auroc_se,
    p_value, score_levels``."""
    from tamperbench.stats.equivalence import tost_pvalue

    out = {"name": "undetermined", "text": VERDICTS["undetermined"], "n_items": c.get("items", 0),
           "item_floor": ITEM_FLOOR, "p_value": c.get("p_value"), "test": c.get("p_test"), "decided_by": by,
           "equivalence_margin": EQUIVALENCE_MARGIN, "equivalence_alpha": EQUIVALENCE_ALPHA, "claim_licensed": False}
    if not c.get("pairs"):
        return {**out, "reason": "no scorable intervention-sham pair"}
    if c["items"] < ITEM_FLOOR:
        return {**out, "reason": too_few(c["items"]), "too_few_items": True}
    if constant_reporter(c):
        return {**out, "reason": "constant reporter: every intervention and sham score is identical, so the reports "
                                 "cannot discriminate and no equivalence bound is read from them"}
    lo, hi = c["auroc_ci"]
    if reject:
        if c["auroc"] > 0.5 and lo > 0.5:
            return {**out, "name": "exceeds_sham", "text": VERDICTS["exceeds_sham"], "claim_licensed": True,
                    "reason": f"p = {c['p_value']:.3g} ({by}) and the AUROC interval lies above 0.5"}
        if c["auroc"] < 0.5 and hi < 0.5:
            return {**out, "name": "below_sham", "text": VERDICTS["below_sham"], "claim_licensed": True,
                    "reason": f"p = {c['p_value']:.3g} ({by}) and the AUROC interval lies below 0.5"}
    se = c.get("auroc_se")
    if se is None or not math.isfinite(se) or se <= 0:
        return {**out, "reason": "not rejected, and the bootstrap is degenerate (SE 0): no equivalence bound"}
    p_eq = tost_pvalue(c["auroc"], se, EQUIVALENCE_MARGIN)
    out["equivalence_p"] = p_eq
    if p_eq < EQUIVALENCE_ALPHA:
        return {**out, "name": "bounded", "text": VERDICTS["bounded"], "claim_licensed": True,
                "reason": f"TOST p = {p_eq:.3g} < {EQUIVALENCE_ALPHA} for AUROC within 0.5 +/- {EQUIVALENCE_MARGIN}"}
    return {**out, "reason": (f"neither exceeds nor falls below sham ({by}: not rejected or the interval reaches 0.5), "
                              f"and not bounded within 0.5 +/- {EQUIVALENCE_MARGIN} (TOST p = {p_eq:.3g})")}


def line(v: dict) -> str:
    """One printed line: the verdict's text, its p-value and test, its items."""
    p = v.get("p_value")
    ps = "n/a" if p is None else f"{p:.3g}"
    return f"{v['text']} ({v['reason']}; p = {ps}, {v['n_items']} items)"


def apply(det_cells: list[dict], pooled: list[dict], others: Sequence[dict] = ()) -> dict:
    """Benjamini-Hochberg over the detection cells that can license a claim (scorable, at or above the item
    floor), then every cell's and pool's verdict in ``detection.complete.verdict``. A cell below the floor
    is left out of the family (its ``bh_q`` is None): a test that licenses nothing must not dilute the
    others. Pools and ``others`` (the confidence family's yes/no reports) are not in the family; their verdict
    reads the unadjusted p at 0.05 and says so.
    Returns the BH summary (``bh`` in the result)."""
    from tamperbench.stats.multiple import benjamini_hochberg

    def in_family(c: dict) -> bool:
        return bool(c["pairs"]) and c["items"] >= ITEM_FLOOR and c.get("p_value") is not None

    comps = [c["detection"]["complete"] for c in det_cells]
    bh = benjamini_hochberg([c["p_value"] if in_family(c) else float("nan") for c in comps])
    for c, rej, q in zip(comps, bh["reject"], bh["q"]):
        fam = in_family(c)
        c["bh_q"], c["bh_reject"] = (q, rej) if fam else (None, None)
        c["verdict"] = verdict(c, rej if fam else None, by=f"BH across {bh['m']} cells at q < {bh['alpha']}")
    for p, what in [(p, "a pool") for p in pooled] + [(o["detection"], "a confidence cell") for o in others]:
        c = p["complete"]
        c["verdict"] = verdict(c, c.get("p_value") is not None and c["p_value"] < 0.05,
                               by=f"unadjusted at 0.05: {what} is not in the BH family")
    bh["family"] = f"detection cells with a scorable pair and at least {ITEM_FLOOR} distinct items"
    return bh
