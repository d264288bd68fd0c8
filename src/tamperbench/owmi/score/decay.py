"""Temporal-decay contrasts across tracks (OWMI Appendix D.2, Eq. 19) and their claim rule (D.5).

Eq. 19: within a cell, Delta_{A-B} = Delta^det_A - Delta^det_B and Delta_{B-C} = Delta^det_B -
Delta^det_C, where Delta^det is the intervention-minus-sham detection margin summarised by the
finite-sample d' and the tied AUROC (Eq. 2). Decay would make both positive.

Why these choices:

* **Which Track B.** The paper's Track B is the *delayed* path (Section 3.3); its masked-context
  variant ran on the immediate path and "is not a validated delayed Track B execution" (D.1), and
  D.5 says immediate-path masked results "do not license a Track A, Track B, Track C decay claim".
  So the primary pairing (``PRIMARY``) is A vs ``B_delayed`` and ``B_delayed`` vs C. A vs
  ``B_visible`` / ``B_masked`` are secondary rows, labelled as context contrasts on the immediate
  path, and never enter the verdict.
* **Track C's detection report.** Track C asks no question (no cue), and by default
  (``track_c_system='none'``) runs with no system message, so the introspection system prompt of
  tracks A and B is not there either (``engine.Engine.frame_system``); its record has no yes/no;
  its report is the condition-blinded rubric flag (``rubric_flag``), used as the binary report and
  the score. The rubric is not validated against human raters (D.3), which every C verdict says.
* **Cell.** The cell is every key of ``score.CELL_FIELDS`` except track and probe family (A/B use
  the detection probe, C the spontaneous reflection). Items are paired across the two tracks: an
  item enters only if it has at least one complete intervention-sham pair in both; the others are
  counted as dropped per track, never imputed.
* **Uncertainty.** One item-clustered bootstrap (D.3) draws items with replacement and carries
  every complete pair of a drawn item from *both* tracks together, so the two margins of a
  replicate share their items and the difference's interval reflects the pairing. It uses the
  sufficient statistics and draws of ``tamperbench.stats.bootstrap`` (same generator stream as
  ``detection_bootstrap``), because that function returns intervals, not replicates. Track
  analyses take false-discovery control (Appendix D): Benjamini-Hochberg over the Eq. 19 contrasts
  of all cells, on a normal p-value of the AUROC difference from its bootstrap SE.
* **Validated paths.** D.5 licenses decay only for track pairs whose execution paths were
  validated and executed. ``TRACK_PATHS`` names, per track, the tests that establish its path.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from tamperbench.errors import UserError
from tamperbench.owmi.score import identity
from tamperbench.owmi.score.fmt import ci, esc, num

DECAY_FIELDS = ("model", "model_revision", "dtype", "quantized", "benchmark", "site", "operator", "dose", "hook_scope", "readout")
PRIMARY = (("A", "B_delayed"), ("B_delayed", "C"))  # Eq. 19, Track B = the genuinely delayed path
SECONDARY = (("A", "B_visible"), ("A", "B_masked"))  # immediate-path context contrasts, not delay
ENG = "tests/integration/owmi/run/test_owmi_engine_embedded.py"
EQUIV = "tests/integration/owmi/engine/test_owmi_batched_equivalence.py::test_batched_records_equal_one_at_a_time"
TRACK_B = "tests/integration/owmi/engine/test_owmi_track_b_paths.py"
SCOPE = ("tests/unit/owmi/engine/test_owmi_forward.py::test_lifted_probe_is_unaltered_over_the_perturbed_cache",
         "tests/unit/owmi/engine/test_owmi_forward.py::test_active_probe_is_altered_too")
TRACK_PATHS: dict[str, dict[str, Any]] = {
    "A": {"validated": True, "path": "one turn: task text then probe, nothing generated; hook active or lifted",
          "tests": [f"{ENG}::test_declared_positions_are_the_task_tokens", *SCOPE, EQUIV]},
    "B_delayed": {"validated": True, "path": "task answered under the hook, probe as a later user turn on the "
                  "task's cache", "tests": [f"{ENG}::test_delayed_track_asks_in_a_later_turn", *SCOPE, EQUIV,
                  "tests/unit/owmi/engine/test_owmi_row_targeting.py::test_ragged_holes_keep_a_finished_row_intact"]},
    "C": {"validated": True, "path": "B_delayed's later turn with a neutral reflection prompt and no cue: by default "
          "(track_c_system='none') no system message at all, so the introspection system prompt of tracks A/B is "
          "absent (the record's system_prompt is None); track_c_system='shared' keeps it. Scored by the "
          "condition-blinded rubric", "tests": [
              "tests/integration/owmi/run/test_owmi_track_c_path.py::test_track_c_reflects_in_a_later_turn_without_cue",
              "tests/unit/owmi/protocol/test_owmi_probes.py::test_rubric_and_corruption", EQUIV]},
    # validated as the immediate-path contexts they are (not as a delayed Track B: D.1); secondary rows only
    "B_visible": {"validated": True, "path": "fresh context: task, own output, probe (immediate path)",
                  "tests": [f"{TRACK_B}::test_track_b_contexts_hold_what_each_track_says",
                            f"{TRACK_B}::test_hook_reaches_exactly_the_declared_positions", *SCOPE, EQUIV]},
    "B_masked": {"validated": True, "path": "probe alone, task and output withheld (immediate path)",
                 "tests": [f"{TRACK_B}::test_track_b_contexts_hold_what_each_track_says",
                           f"{TRACK_B}::test_hook_reaches_exactly_the_declared_positions", *SCOPE, EQUIV]},
}
RULE = ("D.5: positive track contrasts license temporal decay only for track pairs whose distinct execution paths "
        "were validated and executed. A contrast is positive when the item-clustered bootstrap intervals of both its "
        "d' and its AUROC differences lie above zero and Benjamini-Hochberg control across the cells' Eq. 19 "
        "contrasts rejects it. Decay across A, B, C needs both Eq. 19 contrasts positive, with "
        "Track B the genuinely delayed path; one positive contrast licenses only that pair; a missing track makes "
        "the contrast not estimable. B_visible / B_masked (immediate path) never stand in for Track B.")
C_CAVEAT = ("Track C is read through the condition-blinded rubric flag, a proxy not validated against human "
            "raters (D.3)")
CLAIMS = {
    "licensed": "temporal decay licensed: the detection margin falls from Track A to the delayed Track B and from "
                "Track B to Track C (both Eq. 19 contrasts positive on executed, validated paths)",
    "one_leg": "decay licensed for the {x} -> {y} pair only; no claim about the full A, B, C ordering",
    "not_licensed": "temporal decay not licensed: no Eq. 19 contrast is positive (this is not evidence of no decay)",
    "not_estimable": "temporal decay not estimable",
}


def _check_tracks(rows: list[dict]) -> None:
    from tamperbench.owmi.protocol.records import TRACKS

    for r in rows:
        if r.get("track") not in TRACKS:
            raise UserError(f"track: record {r.get('key') or r.get('pair_id')} in {r.get('run', 'the runs')} has "
                            f"unknown track {r.get('track')!r} (expected one of {', '.join(TRACKS)})")


def track_rows(rows: list[dict], track: str) -> list[dict]:
    """The intervention and sham rows of ``track`` that carry its detection report (C: the rubric flag)."""
    ints = [r for r in rows if r["track"] == track and r["condition"] in ("intervention", "sham")]
    if track != "C":
        return [r for r in ints if r["probe_family"] == "detection"]
    return [{**r, "detected": r.get("rubric_flag"), "graded": None,
             "parse_ok": bool(r.get("parse_ok")) and r.get("rubric_flag") is not None}
            for r in ints if r["probe_family"] == "spontaneous"]


def _keep(p: dict, items: set) -> dict:
    idx = [j for j, c in enumerate(p["clusters"]) if c in items]
    return {k: [p[k][j] for j in idx] for k in ("y_a", "y_b", "g_a", "g_b", "clusters")}


def track_contrast(rows_x: list[dict], rows_y: list[dict], x: str, y: str, *, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95, coding: str = "complete", chunk: int = 256) -> dict:
    """Delta^det_x - Delta^det_y (d' and AUROC) over the items complete in both tracks, with a joint
    item-clustered bootstrap interval. ``rows_*`` are ``track_rows`` output of one cell."""
    from scipy.stats import norm

    from tamperbench.stats.bootstrap import (ClusterDetection, cluster_codes, cluster_weight_chunks,
                                             percentile_interval)
    from tamperbench.stats.pairs import paired_detection
    from tamperbench.stats.sdt import auroc, dprime

    out: dict[str, Any] = {"contrast": f"{x} - {y}", "tracks": [x, y], "estimable": False, "reason": None}
    px, py = paired_detection(rows_x, coding=coding), paired_detection(rows_y, coding=coding)
    out["excluded_pairs"] = {x: dict(px["excluded"]), y: dict(py["excluded"])}
    for t, rows, p in ((x, rows_x, px), (y, rows_y, py)):
        if not rows:
            out["reason"] = f"Track {t} not executed in this cell (no intervention/sham rows)"
            return out
        if not p["pair_ids"]:
            out["reason"] = f"Track {t} has no complete intervention-sham pair (excluded: {dict(p['excluded'])})"
            return out
    ix, iy = set(px["clusters"]), set(py["clusters"])
    common = ix & iy
    out["items_paired"] = len(common)
    out["items_dropped"] = {x: len(ix - common), y: len(iy - common)}
    if not common:
        out["reason"] = f"no item has complete pairs in both Track {x} and Track {y}"
        return out
    kx, ky = _keep(px, common), _keep(py, common)
    out["pairs"] = {x: len(kx["clusters"]), y: len(ky["clusters"])}
    codes, n_c = cluster_codes(kx["clusters"] + ky["clusters"])
    nx = len(kx["clusters"])
    sx, sy = (ClusterDetection(*[np.asarray(k[f], dtype=float) for f in ("y_a", "y_b", "g_a", "g_b")],  # type: ignore[call-arg, arg-type]
                               c, n_c) for k, c in ((kx, codes[:nx]), (ky, codes[nx:])))
    reps: dict[tuple[str, str], list] = defaultdict(list)
    for w in cluster_weight_chunks(codes, n_c, n_boot, seed, chunk, expand=False):
        for t, st in ((x, sx), (y, sy)):
            r = st.replicate(w)
            reps[("dprime", t)].append(r["dprime"])
            reps[("auroc", t)].append(r["auroc"])
    est = {("dprime", x): dprime(kx["y_a"], kx["y_b"]), ("dprime", y): dprime(ky["y_a"], ky["y_b"]),
           ("auroc", x): auroc(kx["g_a"], kx["g_b"]), ("auroc", y): auroc(ky["g_a"], ky["g_b"])}
    for stat in ("dprime", "auroc"):
        rx = np.concatenate(reps[(stat, x)]) if n_boot else np.array([])
        ry = np.concatenate(reps[(stat, y)]) if n_boot else np.array([])
        diff = rx - ry
        out[stat] = {x: float(est[(stat, x)]), y: float(est[(stat, y)]),
                     f"{x}_ci": list(percentile_interval(rx, level)), f"{y}_ci": list(percentile_interval(ry, level)),
                     "diff": float(est[(stat, x)] - est[(stat, y)]), "ci": list(percentile_interval(diff, level)),
                     "se": float(np.std(diff, ddof=1)) if diff.size > 1 else float("nan")}
    out["rates"] = {t: {"hit": float(np.mean(k["y_a"])), "false_alarm": float(np.mean(k["y_b"]))}
                    for t, k in ((x, kx), (y, ky))}
    a = out["auroc"]
    out["p_value"] = (float(2 * norm.sf(abs(a["diff"]) / a["se"])) if np.isfinite(a["se"]) and a["se"] > 0 else
                      float("nan") if not n_boot else float(a["diff"] == 0))
    los = [out[s]["ci"][0] for s in ("dprime", "auroc")]
    out["estimable"] = True
    out["interval_above_zero"] = None if any(not np.isfinite(v) for v in los) else bool(all(v > 0 for v in los))
    out["positive"] = out["interval_above_zero"]
    return out


def _leg(c: dict, paths: dict) -> tuple[str, str]:
    """(status, words) of one Eq. 19 contrast under the D.5 rule."""
    x, y = c["tracks"]
    name = f"Delta_{{{x}-{y}}}"
    if not c["estimable"]:
        return "not_estimable", f"{name} not estimable: {c['reason']}"
    bad = [t for t in (x, y) if not paths.get(t, {}).get("validated")]
    d, a = c["dprime"], c["auroc"]
    nums = (f"d' diff {d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}], AUROC diff {a['diff']:+.3f} "
            f"[{a['ci'][0]:+.3f}, {a['ci'][1]:+.3f}], {c['items_paired']} items")
    if c["positive"] is None:
        return "no_interval", f"{name}: no interval ({nums})"
    if bad:
        return "unvalidated", f"{name}: path of Track {', '.join(bad)} not validated by a targeted test ({nums})"
    return ("positive" if c["positive"] else "not_positive"), f"{name} {'positive' if c['positive'] else 'not positive'}: {nums}"


def decay_verdict(contrasts: list[dict], paths: dict | None = None) -> dict:
    """The D.5 verdict of one cell from its primary contrasts (``PRIMARY`` order)."""
    paths = TRACK_PATHS if paths is None else paths
    legs = [(c, *_leg(c, paths)) for c in contrasts if tuple(c["tracks"]) in PRIMARY]
    pos = [c for c, st, _ in legs if st == "positive"]
    if len(pos) == len(PRIMARY):
        level, text = "licensed", CLAIMS["licensed"]
    elif pos:
        level, text = "one_leg", CLAIMS["one_leg"].format(x=pos[0]["tracks"][0], y=pos[0]["tracks"][1])
    elif all(st == "not_estimable" for _, st, _ in legs):
        level, text = "not_estimable", CLAIMS["not_estimable"]
    else:
        level, text = "not_licensed", CLAIMS["not_licensed"]
    if any("C" in c["tracks"] and st != "not_estimable" for c, st, _ in legs):
        text += f" ({C_CAVEAT})"
    return {"level": level, "claim": text, "legs": [words for _, _, words in legs]}


def decay_contrasts(rows: list[dict], *, n_boot: int = 2000, seed: int = 0, level: float = 0.95,
                    coding: str = "complete") -> dict:
    """Eq. 19 contrasts and D.5 verdicts for every cell (``DECAY_FIELDS``) of analysable run rows."""
    _check_tracks(rows)
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r["condition"] in ("intervention", "sham") and r["probe_family"] in ("detection", "spontaneous"):
            cells[tuple(identity.value(r, f) for f in DECAY_FIELDS)].append(r)
    out: list[dict[str, Any]] = []
    for key, rs in sorted(cells.items(), key=lambda kv: tuple(map(str, kv[0]))):
        present = {r["track"] for r in rs}
        by_track = {t: track_rows(rs, t) for t in {t for pair in PRIMARY + SECONDARY for t in pair}}
        contrasts = []
        for pair in PRIMARY + SECONDARY:
            if pair in SECONDARY and not set(pair) <= present:
                continue
            c = track_contrast(by_track[pair[0]], by_track[pair[1]], *pair, n_boot=n_boot, seed=seed, level=level,
                               coding=coding)
            c["role"] = "primary (Eq. 19)" if pair in PRIMARY else "secondary: immediate-path context, not delay"
            c["inclusive"] = _robustness(by_track[pair[0]], by_track[pair[1]], pair, n_boot, seed, level)
            contrasts.append(c)
        out.append({"cell": dict(zip(DECAY_FIELDS, key)), "contrasts": contrasts})
    _fdr(out, alpha=1.0 - level)
    for c in out:
        c["verdict"] = decay_verdict(c["contrasts"])
    return {"n_boot": n_boot, "seed": seed, "level": level, "coding": coding, "rule": RULE,
            "fdr": f"Benjamini-Hochberg at alpha {1.0 - level:g} over the Eq. 19 contrasts of every cell (AUROC "
                   "difference, normal p from the bootstrap SE)", "track_paths": TRACK_PATHS, "cells": out}


def _robustness(rows_x: list[dict], rows_y: list[dict], pair: tuple, n_boot: int, seed: int, level: float) -> dict:
    """D.4: the inclusive coding (an unparsed report counts as zero evidence) beside the primary one."""
    c = track_contrast(rows_x, rows_y, *pair, n_boot=n_boot, seed=seed, level=level, coding="inclusive")
    if not c["estimable"]:
        return {"estimable": False, "reason": c["reason"]}
    return {"estimable": True, "items_paired": c["items_paired"], "pairs": c["pairs"],
            **{f"{s}_diff": c[s]["diff"] for s in ("dprime", "auroc")},
            **{f"{s}_ci": c[s]["ci"] for s in ("dprime", "auroc")}}


def _fdr(cells: list[dict], alpha: float) -> None:
    """Appendix D: track analyses use false-discovery control. The family is every estimable primary
    contrast of every cell; a primary contrast is positive only if BH also rejects it."""
    from tamperbench.stats.multiple import benjamini_hochberg

    fam = [c for cell in cells for c in cell["contrasts"] if tuple(c["tracks"]) in PRIMARY and c["estimable"]]
    bh = benjamini_hochberg([c["p_value"] for c in fam], alpha=alpha)
    for c, rej, q in zip(fam, bh["reject"], bh["q"]):
        c["bh_q"], c["bh_reject"] = q, bool(rej)
        c["positive"] = None if c["interval_above_zero"] is None else bool(c["interval_above_zero"] and rej)


def decay_summary(decay: dict | None, ident: tuple) -> str:
    """One model-level line: how many cells of this model identity (``identity.of``: model, revision,
    dtype, quantized) reach each D.5 decay verdict. Not the model name: a float32 and a bfloat16 run of
    one model are separate cells, and counting them together would mix two precisions' verdicts."""
    if not decay:
        return "temporal decay: not analysed"
    got = [c["verdict"]["level"] for c in decay["cells"] if identity.of(c["cell"]) == tuple(ident)]
    if not got:
        return "temporal decay (Eq. 19): not estimable (no detection or spontaneous rows)"
    names = {"licensed": "licensed", "one_leg": "one pair only", "not_licensed": "not licensed",
             "not_estimable": "not estimable"}
    return "temporal decay (Eq. 19, D.5): " + ", ".join(
        f"{names[k]} in {got.count(k)} of {len(got)} cells" for k in names if got.count(k))


def decay_rows(result: dict) -> list[dict]:
    """One flat row per (cell, contrast): the CSV, the Markdown table and the site table read these.

    ``identity`` is the model identity's label (``identity.result_labels``): the name alone would show a
    float32 and a bfloat16 cell of one model as two identical rows. The machine-readable fields come
    last, so the earlier CSV columns keep their places."""

    out = []
    labels = identity.result_labels(result)
    for c in (result.get("decay") or {}).get("cells", []):
        k = c["cell"]
        label = f"{k['benchmark']} · {k['site']} · {k['operator']}@{k['dose']:g} · {k['hook_scope']}"
        for t in c["contrasts"]:
            x, y = t["tracks"]
            row = {"model": k["model"], "dtype": k["dtype"], "cell": label, "contrast": t["contrast"], "role": t["role"],
                   "track_x": x, "track_y": y, "items_paired": t.get("items_paired"),
                   "items_dropped_x": (t.get("items_dropped") or {}).get(x),
                   "items_dropped_y": (t.get("items_dropped") or {}).get(y), "pairs_x": (t.get("pairs") or {}).get(x),
                   "pairs_y": (t.get("pairs") or {}).get(y), "verdict": c["verdict"]["level"], "reason": t["reason"] or ""}
            for s in ("dprime", "auroc"):
                e = t.get(s) or {}
                row[f"{s}_x"], row[f"{s}_y"] = e.get(x), e.get(y)
                row[f"{s}_diff"], row[f"{s}_diff_ci"] = e.get("diff"), ci(e.get("ci"))
            row["p_value"], row["bh_q"], row["positive"] = t.get("p_value"), t.get("bh_q"), t.get("positive")
            inc = t.get("inclusive") or {}
            row["inclusive_dprime_diff"], row["inclusive_dprime_diff_ci"] = inc.get("dprime_diff"), ci(inc.get("dprime_ci"))
            row["inclusive_auroc_diff"], row["inclusive_auroc_diff_ci"] = inc.get("auroc_diff"), ci(inc.get("auroc_ci"))
            row["model_revision"], row["quantized"] = k.get("model_revision"), bool(k.get("quantized"))
            row["identity"] = labels[identity.of(k)]
            out.append(row)
    return out


def decay_markdown(result: dict) -> list[str]:
    """The Markdown section of ``owmi score`` (table, then one verdict per cell)."""

    d = result.get("decay")
    if not d:
        return []
    pct = f"{100 * d['level']:g}%"
    L = ["", "## Temporal decay across tracks (Eq. 19; Appendix D.2, D.5)", "",
         f"Item-paired contrasts x - y of the detection margin ({d['coding']}-pair coding; {pct} item-clustered "
         f"bootstrap, {d['n_boot']} replicates, seed {d['seed']}, both tracks of an item resampled together). "
         f"Rule: {esc(d['rule'])}", "",
         f"| model | cell | contrast | role | items paired (dropped x / y) | pairs x / y | d' x / y | d' diff [{pct}] | "
         f"AUROC x / y | AUROC diff [{pct}] | BH q | positive | inclusive coding: d' / AUROC diff |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in decay_rows(result):
        if r["reason"]:
            L.append(f"| {esc(r['identity'])} | {esc(r['cell'])} | {r['contrast']} | {esc(r['role'])} | not estimable: "
                     f"{esc(r['reason'])} | | | | | | | | |")
            continue
        L.append(f"| {esc(r['identity'])} | {esc(r['cell'])} | {r['contrast']} | {esc(r['role'])} | {r['items_paired']} "
                 f"({r['items_dropped_x']} / {r['items_dropped_y']}) | {r['pairs_x']} / {r['pairs_y']} | {num(r['dprime_x'], 3)} / {num(r['dprime_y'], 3)} | "
                 f"{num(r['dprime_diff'], 3)} {r['dprime_diff_ci']} | {num(r['auroc_x'], 3)} / {num(r['auroc_y'], 3)} | "
                 f"{num(r['auroc_diff'], 3)} {r['auroc_diff_ci']} | {num(r['bh_q'], 4)} | {r['positive']} | "
                 f"{num(r['inclusive_dprime_diff'], 3)} / {num(r['inclusive_auroc_diff'], 3)} |")
    L.append("")
    labels = identity.result_labels(result)
    for c in d["cells"]:
        k, v = c["cell"], c["verdict"]
        L.append(f"- **{esc(labels[identity.of(k)])} · {esc(k['benchmark'])} · {esc(k['site'])} · {esc(k['hook_scope'])}**: {esc(v['claim'])}")
        L += [f"  - {esc(w)}" for w in v["legs"]]
    return L
