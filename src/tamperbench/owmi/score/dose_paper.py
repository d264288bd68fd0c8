"""``owmi score --dose-model paper``: the paper's dose-response fit (Eq. 10, Eq. 11, D.4) beside the simplified one.

The default (``--dose-model simple``) is ``score.ladder_entry``: one fit per cell with an item random
intercept, penalised likelihood and a bootstrap. The paper's model pools the detection rows of every
model and site that share benchmark, operator, probe family, track, hook scope and read-out (dose
enters as the covariate) and fits crossed item, site and model random effects by NUTS
(``tamperbench.stats.dose_bayes``), restricted to the used-object stratum as the simplified fit is.

Before any sampling a pool is declared not identified when it has fewer than two positive doses
(no extrapolation to zero dose), no complete intervention/sham pairs, or fewer than ``MIN_ITEMS``
distinct items (an item-level SD from a handful of items is the prior, not the data). After
sampling: divergent transitions, R-hat or ESS outside their bounds (named in the fit's diagnostics).
Claim verdicts keep reading the simplified ladder; the paper's fit is reported beside it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tamperbench.errors import UserError

POOL_FIELDS = ("benchmark", "operator", "probe_family", "track", "hook_scope", "readout")
MIN_ITEMS = 10  # distinct items below which the item random effect (and so m0's integral) is prior-driven
USED_THRESHOLD_NATS = 0.05  # the same used-object rule as the simplified fit (score.ladder_entry)
CHAINS, WARMUP, DRAWS = 4, 1000, 1000


def require_extra() -> None:
    """One line naming the install when the [bayes] extra is missing (exit 2)."""
    from tamperbench.stats.dose_bayes import INSTALL_HINT, available

    if not available():
        raise UserError(f"--dose-model paper: the paper's dose model needs numpyro and jax: {INSTALL_HINT}")


def pool_data(rows: list[dict]) -> dict:
    """Complete intervention/sham pairs of one pool as model inputs, or {'reason': ...} when none can be fitted."""
    from tamperbench.owmi.score import identity
    from tamperbench.owmi.score.score import dose_magnitude
    from tamperbench.stats.pairs import paired_detection

    keyed = [{**r, "_pair": f"{r['run']}|{r['pair_id']}"} for r in rows if r["condition"] in ("intervention", "sham")]
    p = paired_detection(keyed, pair="_pair")
    if not p["pair_ids"]:
        return {"reason": "no complete intervention/sham pairs"}
    by_pid = {r["_pair"]: r for r in keyed if r["condition"] == "intervention"}
    ints = [by_pid[pid] for pid in p["pair_ids"]]
    has_used = all(r.get("causal_effect") is not None for r in ints)
    keep = [abs(r["causal_effect"]) > USED_THRESHOLD_NATS for r in ints] if has_used else [True] * len(ints)
    ints = [r for r, k in zip(ints, keep) if k]
    y_a = [v for v, k in zip(p["y_a"], keep) if k]
    y_b = [v for v, k in zip(p["y_b"], keep) if k]
    mags = [dose_magnitude(r["operator"], r["dose"]) for r in ints]
    out: dict[str, Any] = {"stratified": has_used, "used_threshold_nats": USED_THRESHOLD_NATS if has_used else None,
           "pairs": len(ints), "pairs_outside_used_stratum": keep.count(False),
           "doses": sorted({m for m in mags if m > 0}), "items": len({r["item_id"] for r in ints}),
           "sites": sorted({str(r["site"]) for r in ints}), "models": sorted({str(identity.of(r)) for r in ints})}
    if not ints:
        return {**out, "reason": "no pairs in the used-object stratum"}
    why = []  # every reason at once, so one rerun can fix them all
    if len(out["doses"]) < 2:
        why.append(f"{len(out['doses'])} positive dose level(s): at least two are needed to extrapolate to zero dose")
    if out["items"] < MIN_ITEMS:
        why.append(f"{out['items']} distinct item(s), fewer than {MIN_ITEMS}: the item random effect would be the prior")
    if why:
        return {**out, "reason": "; ".join(why)}
    groups = {"item": [r["item_id"] for r in ints] * 2, "site": [r["site"] for r in ints] * 2,
              "model": [str(identity.of(r)) for r in ints] * 2}
    n = len(ints)
    return {**out, "y": [float(v) for v in y_a + y_b], "z": [1.0] * n + [0.0] * n, "dose": mags + [0.0] * n,
            "groups": groups}


def paper_ladders(runs: Sequence[str | Path], *, seed: int = 0, chains: int = CHAINS, warmup: int = WARMUP,
                  draws: int = DRAWS) -> list[dict]:
    """One entry per pool of detection rows (POOL_FIELDS) that has a dose ladder or more than one dose."""
    from tamperbench.owmi.score.score import load_runs
    from tamperbench.stats.dose_bayes import fit_paper

    rows, _, _ = load_runs(runs)
    pools: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r["probe_family"] == "detection":
            pools[tuple(r[f] for f in POOL_FIELDS)].append(r)
    out = []
    for key, rs in sorted(pools.items(), key=lambda kv: tuple(map(str, kv[0]))):
        data = pool_data(rs)
        entry = {"pool": dict(zip(POOL_FIELDS, key)), **{k: v for k, v in data.items() if k not in ("y", "z", "dose", "groups")}}
        if "reason" in data:
            out.append({**entry, "identified": False, "m0": None, "leakage_share": None})
            continue
        fit = fit_paper(data["y"], data["z"], data["dose"], data["groups"], seed=seed, chains=chains, warmup=warmup,
                        draws=draws)
        out.append({**entry, **fit})
    return out


def _ci(d: dict | None) -> str:
    return "n/a" if not d else f"{d['estimate']:.3f} [{d['ci'][0]:.3f}, {d['ci'][1]:.3f}]"


def markdown(entries: list[dict]) -> list[str]:
    """Lines for owmi_score.md (and the terminal)."""
    from tamperbench.owmi.score.fmt import esc
    from tamperbench.stats.dose_bayes import PRIORS

    L = ["", "## Dose-response, the paper's model (Eq. 10-11, D.4; --dose-model paper)", "",
         "- model: logit P(y=1) = b0 + b1 z + z g(dose) + b_item + b_site + b_model (crossed Gaussian random effects), "
         "g a monotone linear spline through the observed doses, g(0) = 0, continued linearly below the lowest dose; "
         "pooled over models and sites per benchmark, operator, probe family, track, hook scope and read-out; "
         "used-object stratum; NUTS (numpyro)",
         "- priors: " + "; ".join(f"{k} ~ {v}" for k, v in PRIORS.items()),
         f"- m0 (Eq. 11) integrates the random effects over their fitted distribution, per posterior draw; "
         f"estimate = posterior median, [95% equal-tailed interval]; not identified below {MIN_ITEMS} items, "
         "below two positive doses, or with divergences, R-hat > 1.01 or bulk ESS < 100"]
    if not entries:
        L.append("- no detection rows: nothing to fit")
    for e in entries:
        p = e["pool"]
        head = (f"- {esc(' · '.join(str(p[f]) for f in POOL_FIELDS if f != 'probe_family'))} "
                f"({e.get('pairs', 0)} pairs, {e.get('items', 0)} items, sites {len(e.get('sites', []))}, "
                f"models {len(e.get('models', []))}, doses {', '.join(f'{d:g}' for d in e.get('doses', []))}): ")
        if not e["identified"] and e.get("m0") is None:
            L.append(head + f"not identified: {esc(e['reason'])}")
            continue
        dg = e.get("diagnostics", {})
        tail = (f"; diagnostics: {dg.get('divergences')} divergences, max R-hat {dg.get('max_rhat', float('nan')):.3f}, "
                f"min bulk ESS {dg.get('min_ess_bulk', float('nan')):.0f}; stratified = {e.get('stratified')}")
        if not e["identified"]:
            L.append(head + f"not identified: {e['reason']} (m0 would read {_ci(e['m0'])}){tail}")
            continue
        lam = _ci(e["leakage_share"]) if e.get("leakage_share") else f"not reported ({e['reason']})"
        L.append(head + f"m0 = {_ci(e['m0'])}; m_bar = {_ci(e['m_bar'])}; lambda = {lam}{tail}")
    return L
