"""Eq. 18 with one seed: sigma^2_seed is not estimable, so no domain/object structure "beyond seed
variation" may be declared (audit, issue 26 item 2)."""

from __future__ import annotations

import numpy as np

from tamperbench.owmi.score.claims import structure_claim
from tamperbench.owmi.score.score import variance_entry


def _pairs(seeds: list[int]) -> list[dict]:
    """Strong domain and object effects, items nested in domain; one replicate per (item, object, seed)."""
    rng = np.random.default_rng(0)
    out = []
    for d, dv in (("knowledge", 0.0), ("arithmetic", 3.0), ("commonsense", -3.0)):
        for i in range(6):
            for o, ov in (("resid_post.4", 0.0), ("resid_post.12", 2.5)):
                for s in seeds:
                    out.append({"s": dv + ov + rng.normal(0, 0.05), "domain": d, "object": o, "item": f"{d}-{i}",
                                "seed": s})
    return out


def test_one_seed_refuses_the_structure_claim():
    v = variance_entry({"m": _pairs([0])})["m"]
    assert v["estimable"] is False and "one seed" in v["reason"] and "Eq. 18" in v["reason"]
    line = structure_claim(v)
    assert not line.startswith("the reportability profile has structure") and line.startswith("domain/object structure: not assessable (one seed")


def test_two_seeds_can_still_establish_structure():
    v = variance_entry({"m": _pairs([0, 1])})["m"]
    assert v["estimable"] is True
    assert structure_claim(v).startswith("the reportability profile has structure beyond seed variation")
