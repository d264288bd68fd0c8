"""From run rows to paired samples: parse rates, the two codings of unparseable reports, margins.

Appendix D.3/D.4 rules, implemented once for every caller:

* Report-parse rate per cell and condition = parseable probe responses / attempted ones, with
  numerator, denominator and a Wilson interval. Parse failure is an outcome, never imputed.
* Complete-pair coding (primary): a pair enters only if both its intervention and its sham row
  exist *and* parsed. Inclusive coding (robustness): both rows must exist; an unparseable report
  counts as zero report evidence (detected = 0, graded = 0). A pair missing a row enters neither,
  and every excluded pair is counted by reason instead of being repaired.
* Control margins (Eq. 8): mu_rand = E[s_int - s_rand] over pairs whose intervention and random
  rows both parsed; mu_obs = E[s_int - max_w s_obs,w] over the observer tiers present. The score
  s is the graded report where present, else the binary one.

Rows are plain dicts (DuckDB ``RunStore.rows`` output); the field names are parameters so the
functions are usable outside OWMI.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from tamperbench.stats.intervals import wilson


def score_of(row: dict, binary: str = "detected", graded: str = "graded") -> float:
    g = row.get(graded)
    if g is not None:
        return float(g)
    return float(bool(row.get(binary)))


def parse_rates(rows: Iterable[dict], by: Sequence[str], parsed: str = "parse_ok") -> list[dict]:
    """One entry per distinct value of the ``by`` fields: parsed, attempted, rate, Wilson 95% CI."""
    tally: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        t = tally[tuple(r.get(f) for f in by)]
        t[0] += bool(r.get(parsed))
        t[1] += 1
    out = []
    for key, (k, n) in sorted(tally.items(), key=lambda kv: tuple(map(str, kv[0]))):
        out.append({**dict(zip(by, key)), "parsed": k, "attempted": n, "rate": k / n if n else float("nan"),
                    "ci95": wilson(k, n)})
    return out


def _by_pair(rows: Iterable[dict], pair: str, condition: str) -> dict[str, dict[str, list[dict]]]:
    grouped: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        grouped[r[pair]][r[condition]].append(r)
    return grouped


def paired_detection(rows: Iterable[dict], *, coding: str = "complete", a: str = "intervention",
                     b: str = "sham", pair: str = "pair_id", condition: str = "condition",
                     parsed: str = "parse_ok", cluster: str = "item_id") -> dict:
    """Paired samples for the a-vs-b contrast under one coding ('complete' or 'inclusive').

    Returns ``y_a, y_b`` (binary), ``g_a, g_b`` (graded), ``clusters``, ``pair_ids`` and
    ``excluded`` (Counter of reasons). A pair with several rows of one condition is an input error.
    """
    if coding not in ("complete", "inclusive"):
        raise ValueError(f"coding must be 'complete' or 'inclusive', not {coding!r}")
    out: dict[str, Any] = {"coding": coding, "y_a": [], "y_b": [], "g_a": [], "g_b": [], "clusters": [], "pair_ids": [],
           "excluded": Counter()}
    for pid, conds in sorted(_by_pair(rows, pair, condition).items()):
        if a not in conds and b not in conds:
            continue
        if a not in conds or b not in conds:
            out["excluded"][f"missing_{b if a in conds else a}"] += 1
            continue
        if len(conds[a]) > 1 or len(conds[b]) > 1:
            raise ValueError(f"pair {pid}: more than one '{a}' or '{b}' row")
        ra, rb = conds[a][0], conds[b][0]
        ok_a, ok_b = bool(ra.get(parsed)), bool(rb.get(parsed))
        if coding == "complete" and not (ok_a and ok_b):
            reason = "both_unparsed" if not (ok_a or ok_b) else (f"{a}_unparsed" if not ok_a else f"{b}_unparsed")
            out["excluded"][reason] += 1
            continue
        for side, r, ok in (("a", ra, ok_a), ("b", rb, ok_b)):
            out[f"y_{side}"].append(float(bool(r.get("detected"))) if ok else 0.0)
            out[f"g_{side}"].append(score_of(r) if ok else 0.0)
        out["clusters"].append(ra.get(cluster))
        out["pair_ids"].append(pid)
    return out


def control_margin(rows: Iterable[dict], control: str | Sequence[str], *, pair: str = "pair_id",
                   condition: str = "condition", parsed: str = "parse_ok", cluster: str = "item_id",
                   a: str = "intervention") -> dict:
    """Per-pair differences s_a - max(s_control rows) for the pairs where all of them parsed.

    ``control`` is one condition name ('random_matched') or several whose rows are pooled as the
    observer family (several tiers -> the max over tiers, Eq. 8).
    """
    names = {control} if isinstance(control, str) else set(control)
    diffs: list[float] = []
    clusters: list[object] = []
    dropped: Counter[str] = Counter()
    for _pid, conds in sorted(_by_pair(rows, pair, condition).items()):
        ctrl = [r for c in names for r in conds.get(c, [])]
        if a not in conds or not ctrl:
            if a in conds or ctrl:
                dropped["missing_row"] += 1
            continue
        ra = conds[a][0]
        good = [r for r in ctrl if r.get(parsed)]
        if not ra.get(parsed) or not good:
            dropped["unparsed"] += 1
            continue
        diffs.append(score_of(ra) - max(score_of(r) for r in good))
        clusters.append(ra.get(cluster))
    return {"control": sorted(names), "diffs": diffs, "clusters": clusters, "excluded": dropped}
