"""The known-positive check's rows, verdicts and tables (Section 7.2), read from scored runs.

What the check is and how it runs: ``owmi/controls/positive_check.py``, which runs the adapted model and
its base through ``owmi run`` and hands the scored result to the functions here. This module only reads
a score result (``profile.score_runs``), so ``owmi score`` and the report read the check's rows without
importing any run code.

Pass rule per read-out (:data:`PASS_RULE`): at least the paper's 100 complete pairs, at least 95%
hits and at most 5% false alarms, and the AUROC interval's lower bound above 0.9, for the adapted
model.
"""

from __future__ import annotations

READOUTS = ("generated", "constrained", "choice")
DECIDING_READOUT = "choice"
CHECK_KIND = "known_positive_check"
CHECK_SEEDS = (0, 1)
PAPER_PAIRS, HIT_MIN, FALSE_ALARM_MAX, AUROC_LOWER_MIN = 100, 0.95, 0.05, 0.9
PASS_RULE = (f"adapted model: >= {PAPER_PAIRS} complete pairs (the paper's size), hit rate >= {HIT_MIN:.2f}, "
             f"false-alarm rate <= {FALSE_ALARM_MAX:.2f}, AUROC interval lower bound > {AUROC_LOWER_MIN}")
ADAPTED, BASE = "adapted (known positive)", "unadapted base (leakage floor)"


def rows_of(result: dict, adapted: str) -> list[dict]:
    """The detection cells of a score result, one flat row per (model, read-out)."""
    out = []
    for c in result["cells"]:
        if c["cell"]["probe_family"] != "detection":
            continue
        comp = c["detection"]["complete"]
        rates = c["detection"]["parse_rates"]
        model, n = c["cell"]["model"], comp["pairs"]
        out.append({"model": model, "role": ADAPTED if model == adapted else BASE,
                    "readout": c["cell"].get("readout", "generated"), "site": c["cell"]["site"],
                    "identity": {k: c["cell"].get(k) for k in ("model_revision", "dtype", "quantized")},
                    "pairs": n, "items": comp["items"], "parsed": sum(r["parsed"] for r in rates),
                    "attempted": sum(r["attempted"] for r in rates),
                    "hits": round(comp["hit_rate"] * n) if n else 0,
                    "false_alarms": round(comp["false_alarm_rate"] * n) if n else 0,
                    "hit_rate": comp["hit_rate"], "false_alarm_rate": comp["false_alarm_rate"],
                    "margin": comp["margin"], "margin_ci": comp["margin_ci"], "dprime": comp["dprime"],
                    "dprime_ci": comp["dprime_ci"], "auroc": comp["auroc"], "auroc_ci": comp["auroc_ci"]})
    return sorted(out, key=lambda r: (READOUTS.index(r["readout"]) if r["readout"] in READOUTS else 9, r["role"]))


def passes(row: dict | None) -> tuple[bool, str]:
    """The adapted row against :data:`PASS_RULE`, with the first reason it fails."""
    if row is None or not row["pairs"]:
        return False, "no complete pair"
    why = [w for ok, w in (
        (row["pairs"] >= PAPER_PAIRS, f"{row['pairs']} complete pairs, below the paper's {PAPER_PAIRS}"),
        (row["hit_rate"] >= HIT_MIN, f"hits {row['hits']}/{row['pairs']} below {HIT_MIN:.0%}"),
        (row["false_alarm_rate"] <= FALSE_ALARM_MAX, f"false alarms {row['false_alarms']}/{row['pairs']} above "
         f"{FALSE_ALARM_MAX:.0%}"),
        (row["auroc_ci"][0] > AUROC_LOWER_MIN, f"AUROC lower bound {row['auroc_ci'][0]:.3f} not above {AUROC_LOWER_MIN}"),
    ) if not ok]
    return (not why), ("; ".join(why) if why else "meets the rule")


def status(row: dict | None) -> str:
    """``PASS``; ``FAIL``; or ``TOO FEW PAIRS`` when the adapted row meets every threshold of
    :data:`PASS_RULE` but the size floor (a smaller check, such as ``make demo``'s: not a pass, and not
    evidence against the pipeline either)."""
    ok, _ = passes(row)
    if ok:
        return "PASS"
    if row is not None and row["pairs"] and passes({**row, "pairs": PAPER_PAIRS})[0]:
        return "TOO FEW PAIRS"
    return "FAIL"


def verdicts(rows: list[dict]) -> dict[str, dict]:
    """Per read-out: the adapted row, the base row (leakage floor) and the pass decision."""
    out: dict[str, dict] = {}
    for r in rows:
        out.setdefault(r["readout"], {})["adapted" if r["role"] == ADAPTED else "base"] = r
    for readout, v in out.items():
        ok, why = passes(v.get("adapted"))
        st = status(v.get("adapted"))
        if st == "TOO FEW PAIRS":
            why += f" (every other threshold met: the rule's verdict needs >= {PAPER_PAIRS} pairs)"
        v.update(passes=ok, why=why, status=st, line=f"{readout}: {st} ({why}; rule: {PASS_RULE})")
    return out


def _ci(x: float | None, ci: list[float] | None, f: str = ".3f") -> str:
    return "n/a" if x is None or ci is None else f"{x:{f}} [{ci[0]:{f}}, {ci[1]:{f}}]"


def table_lines(rows: list[dict]) -> list[str]:
    """Markdown table of the check (the same in the terminal, ``known_positive_check.md`` and the site)."""
    lines = ["| model | read-out | pairs (items) | hits | false alarms | AUROC [95% CI] | d' [95% CI] | "
             "margin over sham [95% CI] |", "|" + "---|" * 8]
    for r in rows:
        n = r["pairs"]
        lines.append(f"| {r['role']}: `{r['model']}` | {r['readout']} | {n} ({r['items']}) | {r['hits']}/{n} | "
                     f"{r['false_alarms']}/{n} | {_ci(r['auroc'] if n else None, r['auroc_ci'])} | "
                     f"{_ci(r['dprime'] if n else None, r['dprime_ci'], '.2f')} | "
                     f"{_ci(r['margin'] if n else None, r['margin_ci'], '+.3f')} |")
    return lines


def floor_lines(v: dict[str, dict]) -> list[str]:
    out = []
    for readout, d in v.items():
        b = d.get("base")
        if b is not None and b["pairs"]:
            out.append(f"leakage floor ({readout}): the unadapted model's AUROC {_ci(b['auroc'], b['auroc_ci'])} "
                       f"(hits {b['hits']}/{b['pairs']}, false alarms {b['false_alarms']}/{b['pairs']}): what the "
                       "pipeline reads from the intervention with no trained report")
    return out


def anchor_rows(v: dict[str, dict], *, base: str, layer: int, directions: tuple[int, int], trained: list[int],
                runs: list[str]) -> list[dict]:
    """One ``known_positive_check`` anchor per read-out with both models' rows (what the claims read)."""
    out = []
    for readout, d in v.items():
        b, a = d.get("base"), d.get("adapted")
        ident = (b or a or {}).get("identity", {})
        out.append({"kind": CHECK_KIND, "model": base, **ident, "site": (b or a or {}).get("site", f"resid_post.{layer}"),
                    "layer": layer, "readout": readout, "passes": d["passes"], "why": d["why"], "pass_rule": PASS_RULE,
                    "adapted": a, "base": b,
                    "leakage_floor": None if b is None else {"auroc": b["auroc"], "auroc_ci": b["auroc_ci"]},
                    "directions": list(directions), "trained_directions": [min(trained), max(trained)],
                    "disjoint": True, "runs": runs})
    return out

