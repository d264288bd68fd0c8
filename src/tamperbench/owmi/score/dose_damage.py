"""D.5 and Eq. 20 read as the paper states them: "task accuracy unchanged" is an equivalence test, the
detection margin is read against task damage across doses, and output divergence is a named condition.

* **Accuracy unchanged (TOST).** Delta_task (``damage.task_damage``) is unchanged when its 90% item-clustered
  bootstrap interval lies inside +/- ``TASK_MARGIN`` (the two one-sided tests at alpha 0.05) and, where
  that bootstrap is degenerate (every item's score moved the same way or not at all, SE 0), the exact
  one-sided 95% Clopper-Pearson bound on the share of pairs whose task score changed is below
  ``TASK_MARGIN`` too (|Delta_task| cannot exceed that share). Fewer than ``verdict.ITEM_FLOOR`` items:
  not shown. The rule before this one ("damage not shown": the 95% interval does not lie below 0) is
  kept beside it as ``damaged`` / ``rule_before``.
* **Output divergence.** D.5: margins that occur only with measurable output divergence license a
  first-order-leakage account. Divergence is measurable when the intervention runs' mean teacher-forced
  Jensen-Shannon divergence (``js_mean``, nats per position) is at least ``DIVERGENCE_JS``.
* **Margin against damage across doses.** Per dose ladder (a detection cell at two or more doses): one
  row per dose with the AUROC margin (AUROC - 0.5) and its verdict, Delta_task, whether accuracy is
  unchanged, and the mean JS; Kendall's tau of margin against damage (-Delta_task) over the doses with
  its exact p (``scipy.stats.kendalltau(method="exact")``), and Kendall's tau of margin against dose.
"""

from __future__ import annotations

import math
from collections import defaultdict

TASK_MARGIN = 0.10  # |Delta_task| below 10 percentage points of task accuracy counts as unchanged (TOST)
TASK_ALPHA = 0.05
DIVERGENCE_JS = 0.01  # nats per position: mean JS at or above this is measurable output divergence
RULE = (f"accuracy unchanged: TOST at margin +/- {TASK_MARGIN} on Delta_task (90% item-clustered interval inside "
        f"the margin, alpha {TASK_ALPHA}; with a degenerate bootstrap the exact 95% bound on the share of changed "
        f"pairs must be below the margin too; at least the item floor of items)")
DIVERGENCE_RULE = (f"measurable output divergence: mean teacher-forced JS of the intervention runs >= {DIVERGENCE_JS} "
                   "nats per position")


def unchanged(diffs: list[float], items: list, n_boot: int, seed: int) -> dict:
    """The TOST reading of one Delta_task sample (module text)."""
    from tamperbench.owmi.score.verdict import ITEM_FLOOR
    from tamperbench.stats.bootstrap import mean_bootstrap
    from tamperbench.stats.intervals import error_rate_upper_bound

    b = mean_bootstrap(diffs, items, n_boot=n_boot, seed=seed, level=1 - 2 * TASK_ALPHA)
    changed = sum(1 for d in diffs if d != 0)
    bound = error_rate_upper_bound(changed, len(diffs), 0.95)
    n_items = len(set(map(str, items)))
    inside = bool(-TASK_MARGIN < b["ci"][0] and b["ci"][1] < TASK_MARGIN)
    degenerate = not (b["se"] > 0)
    ok = inside and n_items >= ITEM_FLOOR and (not degenerate or bound < TASK_MARGIN)
    why = ("" if ok else f"fewer than {ITEM_FLOOR} items ({n_items})" if n_items < ITEM_FLOOR else
           "the 90% interval reaches the margin" if not inside else
           f"degenerate bootstrap and the exact bound on changed pairs ({changed}/{len(diffs)}: {bound:.3f}) is not below "
           "the margin")
    return {"unchanged": ok, "ci90": list(b["ci"]), "margin": TASK_MARGIN, "changed_pairs": changed,
            "changed_share_upper95": bound, **({"why_not": why} if why else {})}


def divergence_condition(d: dict | None) -> tuple[str, bool | None, str]:
    """D.5's output-divergence condition for one detection cell."""
    name = f"detection not confined to measurable output divergence (mean JS below {DIVERGENCE_JS} nats at this dose)"
    js = (d or {}).get("divergence_js_mean")
    if js is None:
        return name, None, "output divergence not recorded for this cell's intervention runs"
    return name, bool(js < DIVERGENCE_JS), f"mean JS {js:.4f} nats ({DIVERGENCE_RULE})"


def _tau(x: list[float], y: list[float]) -> dict:
    """Kendall's tau with scipy's exact p; with tied values (no exact p exists in scipy) the tau-b statistic and
    its asymptotic p, the method named in the result."""
    from scipy.stats import kendalltau

    try:
        t, method = kendalltau(x, y, method="exact"), "exact"
    except ValueError:  # "Ties found, exact method cannot be used."
        t, method = kendalltau(x, y, method="asymptotic"), "asymptotic (ties)"
    return {"tau": float(t.statistic), "p_value": float(t.pvalue), "method": method}


def dose_tables(cells: list[dict]) -> list[dict]:
    """Per dose ladder: margin against damage across doses with Kendall's tau (module text)."""

    from tamperbench.owmi.score.score import LADDER_FIELDS, dose_magnitude

    ladders: dict[tuple, list[dict]] = defaultdict(list)
    for c in cells:
        if c["cell"]["probe_family"] == "detection" and c.get("detection"):
            ladders[tuple(str(c["cell"].get(f)) for f in LADDER_FIELDS)].append(c)
    out = []
    for _key, cs in sorted(ladders.items(), key=lambda kv: kv[0]):
        if len({c["cell"]["dose"] for c in cs}) < 2:
            continue
        rows = []
        for c in sorted(cs, key=lambda c: dose_magnitude(c["cell"]["operator"], c["cell"]["dose"])):
            comp, dmg = c["detection"]["complete"], c.get("task_damage") or {}
            rows.append({"dose": c["cell"]["dose"], "magnitude": dose_magnitude(c["cell"]["operator"], c["cell"]["dose"]),
                         "auroc_margin": comp["auroc"] - 0.5 if comp.get("pairs") else None,
                         "verdict": (comp.get("verdict") or {}).get("name"),
                         "delta_task": dmg.get("delta_task"), "accuracy_unchanged": (dmg.get("tost") or {}).get("unchanged"),
                         "divergence_js_mean": dmg.get("divergence_js_mean")})
        use = [r for r in rows if r["auroc_margin"] is not None and r["delta_task"] is not None]
        entry: dict = {"cell": {f: cs[0]["cell"].get(f) for f in LADDER_FIELDS}, "doses": rows,
                 "statistic": "Kendall's tau of the AUROC margin against damage (-Delta_task) over doses, exact p "
                              "(the asymptotic tau-b p where values tie: scipy has no exact p with ties)"}
        if len(use) >= 3 and len({r["delta_task"] for r in use}) > 1 and len({r["auroc_margin"] for r in use}) > 1:
            entry["tau_damage"] = {**_tau([r["auroc_margin"] for r in use], [-r["delta_task"] for r in use]),
                                   "doses": len(use)}
        else:
            entry["tau_damage"] = {"tau": None, "p_value": None, "doses": len(use),
                                   "reason": "needs >= 3 doses with a margin and a task score, both varying"}
        m = [r for r in rows if r["auroc_margin"] is not None]
        if len(m) >= 3 and len({r["auroc_margin"] for r in m}) > 1:
            entry["tau_dose"] = {**_tau([r["magnitude"] for r in m], [r["auroc_margin"] for r in m]), "doses": len(m)}
        entry["informative_unchanged_doses"] = sum(1 for r in rows if r["accuracy_unchanged"]
                                                   and r["verdict"] in ("exceeds_sham", "below_sham"))
        out.append(entry)
    return out


def dose_markdown(result: dict) -> list[str]:
    from tamperbench.owmi.score import identity
    from tamperbench.owmi.score.fmt import esc, num

    tabs = result.get("damage_by_dose") or []
    if not tabs:
        return []
    who = identity.result_labels(result)
    L = ["", "## Detection margin against task damage across doses (Eq. 20, D.5)", "", f"- {esc(RULE)}",
         f"- {esc(DIVERGENCE_RULE)}", "- Kendall's tau with its exact p over the doses; an unchanged-accuracy dose with "
         "a decided verdict is informative (D.5)", ""]
    for t in tabs:
        c = t["cell"]
        k = t["tau_damage"]
        tau = (f"tau(margin, damage) = {k['tau']:+.3f}, exact p = {k['p_value']:.3g} over {k['doses']} doses"
               if k.get("tau") is not None else f"tau(margin, damage) not computed ({k['reason']})")
        if t.get("tau_dose"):
            tau += f"; tau(dose, margin) = {t['tau_dose']['tau']:+.3f}, exact p = {t['tau_dose']['p_value']:.3g}"
        L += [f"- {esc(who[identity.of(c)])} · {esc(c['benchmark'])} · {esc(c['site'])} · {esc(c['operator'])} · "
              f"{esc(c['probe_family'])} · track {esc(c['track'])} · {esc(c['hook_scope'])}: {tau}; "
              f"{t['informative_unchanged_doses']} informative unchanged-accuracy doses", "",
              "| dose | AUROC margin | verdict | Delta_task | accuracy unchanged (TOST) | mean JS |", "|---|---|---|---|---|---|"]
        for r in t["doses"]:
            dt = "n/a" if r["delta_task"] is None else f"{r['delta_task']:+.3f}"
            am = "n/a" if r["auroc_margin"] is None or not math.isfinite(r["auroc_margin"]) else f"{r['auroc_margin']:+.4f}"
            L.append(f"| {r['dose']:g} | {am} | {esc(r['verdict'] or 'n/a')} | {dt} | "
                     f"{'n/a' if r['accuracy_unchanged'] is None else ('yes' if r['accuracy_unchanged'] else 'no')} | "
                     f"{num(r['divergence_js_mean'], 4)} |")
        L.append("")
    return L
