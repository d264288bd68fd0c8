"""Observer tiers in the analysis (Appendix C, Eq. 8): all tiers of a cell meet in that cell.

mu_obs is the maximum over the observer family (tier 1 the same model zero-shot, tier 2 another
model reading the same visible record, tier 3 the TF-IDF classifier), so the three tiers must sit in
the subject's cell. Runs written before ``observer_revision`` existed stored a tier-2 row under the
observer's own revision as ``model_revision``; since the revision is part of the cell key, those
rows formed a cell of their own and mu_obs never saw tier 2. ``join_subject`` gives such a row the
subject's identity, taken from the subject rows of its pair in the same run, and keeps the
observer's revision in ``observer_revision``.

Parse rates are given per tier (``tier_parse_rates``): tier 3 is a classifier that cannot fail to
parse, so counting it with the generative tiers would hide that they parsed nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

TIER_NAMES = {1: "tier 1 (same model)", 2: "tier 2 (other model)", 3: "tier 3 (classifier: always parses)"}


def join_subject(rows: list[dict]) -> list[dict]:
    """``rows`` with every observer row under its subject's model revision (see the module text).
    A tier-2 row whose pair has no subject row in its run is left as it is (nothing to join)."""
    subject = {(r.get("run"), r["pair_id"]): r["model_revision"] for r in rows if r["condition"] != "observer"}
    out = []
    for r in rows:
        rev = subject.get((r.get("run"), r["pair_id"]))
        if r["condition"] == "observer" and rev is not None and r["model_revision"] != rev:
            r = {**r, "model_revision": rev, "observer_revision": r.get("observer_revision") or r["model_revision"]}
        out.append(r)
    return out


def tier_parse_rates(rows: Iterable[dict]) -> list[dict]:
    """Parse rates per condition, the observer split by tier: parsed, attempted, rate, Wilson CI, and a label."""
    from tamperbench.stats.pairs import parse_rates

    out = []
    for p in parse_rates(rows, by=["condition", "observer_tier"]):
        tier = p.get("observer_tier")
        label = p["condition"] if p["condition"] != "observer" else f"observer {TIER_NAMES.get(int(tier or 0), f'tier {tier}')}"
        out.append({**p, "label": label})
    return out
