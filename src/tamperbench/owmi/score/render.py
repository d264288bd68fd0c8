"""``owmi score`` output: Markdown (reading), CSV (one row per cell, spreadsheets), JSON (everything).

Text from run records (model names, benchmark ids) is escaped as inert Markdown (``fmt.esc``): a
pipe or newline in a name must not break the table. A model is named by its identity's label
(``identity.labels``: name, revision, dtype, quantized), never by its name alone: one name run at
two precisions is two models here, and two rows or claim lines under one name would be ambiguous.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tamperbench.safeio.files import atomic_open, atomic_write
from tamperbench.owmi.score import identity
from tamperbench.owmi.score.score import DOSE_MODEL
from tamperbench.owmi.score.fmt import (NO_PARSED, READOUTS, cell_label, ci, drop_empty_sections, esc, margin, num,
                                           parse_line, readout_parse_note)


def check_line(a: dict, weights: str) -> str:
    """A known-positive check anchor (``positive_check``) in one line: both rows, the floor named."""
    def row(r: dict | None) -> str:
        if not r or not r.get("pairs"):
            return "no complete pair"
        lo, hi = r["auroc_ci"]
        return (f"hits {r['hits']}/{r['pairs']}, false alarms {r['false_alarms']}/{r['pairs']}, d' = {r['dprime']:.2f}, "
                f"AUROC = {r['auroc']:.3f} [{lo:.3f}, {hi:.3f}]")

    return (f"known-positive check through owmi run, {weights} at {a['site']}, read-out {a['readout']} (held-out "
            f"directions {a['directions'][0]}..{a['directions'][1]}): adapted {row(a.get('adapted'))}; unadapted "
            f"(leakage floor) {row(a.get('base'))}; passes = {a['passes']} ({a.get('why')})")


def _anchor_weights(anchor: dict, who: dict) -> str:
    """The weights an anchor was fitted on, named like the cells it may anchor (``identity.labels``), so a
    reader sees which cells it can attach to (``profile._anchor_for``: equal identity only). An anchor
    written before anchors recorded their identity says so: it attaches by name, and only where one
    identity has that name."""
    if not all(f in anchor for f in identity.FIELDS):
        return f"{anchor.get('model')} (no weights identity recorded: attaches by name, where one identity has it)"
    ident = identity.of(anchor)
    return who.get(ident) or identity.labels([ident])[ident]


def detection_rows(result: dict) -> list[dict]:
    """One row per detection cell (CSV, Markdown, site); the identity fields come last so the earlier
    CSV columns keep their places."""
    out = []
    labels = identity.result_labels(result)
    for c in result["cells"]:
        d = c.get("detection")
        if not d:
            continue
        comp, inc = d["complete"], d["inclusive"]
        parse = parse_line(d["parse_rates"]) + readout_parse_note(c["cell"].get("readout"))
        mg = d["margins"]
        out.append({"model": c["cell"]["model"], "dtype": c["cell"]["dtype"], "cell": cell_label(c["cell"]),
                    "pairs": comp["pairs"], "excluded": json.dumps(comp["excluded"], sort_keys=True),
                    "dprime": comp["dprime"], "dprime_ci": ci(comp["dprime_ci"]), "auroc": comp["auroc"],
                    "auroc_ci": ci(comp["auroc_ci"]), "bh_q": comp.get("bh_q"),
                    "inclusive_pairs": inc["pairs"],
                    "inclusive_dprime": NO_PARSED if inc.get("parsed_pairs") == 0 else inc["dprime"],
                    "inclusive_auroc": NO_PARSED if inc.get("parsed_pairs") == 0 else inc["auroc"],
                    "parse": parse, "margin_random": margin(mg.get("random_matched") or mg.get("random_unit")),
                    "random_kind": "matched" if "random_matched" in mg else ("unit-norm" if "random_unit" in mg else ""),
                    "margin_observer": (margin(mg.get("observer")) if mg.get("observer") or not mg.get("observer_input_side")
                                        else f"input-side baseline {margin(mg['observer_input_side'])} (Track A: the "
                                             "observer reads the prompt only; not the output-side bound, Section 3.4)"),
                    "claim_level": c.get("claim", {}).get("level"), "inclusive_parsed_pairs": inc.get("parsed_pairs"),
                    "model_revision": c["cell"].get("model_revision"), "quantized": bool(c["cell"].get("quantized")),
                    "identity": labels[identity.of(c["cell"])], **_verdict_fields(comp), **_input_side(mg)})
    return out


def _verdict_fields(comp: dict) -> dict:
    """The two-sided verdict's CSV columns (``verdict.py``), after the older columns so they keep their places."""
    v = comp.get("verdict") or {}
    return {"verdict": v.get("name"), "verdict_reason": v.get("reason"), "p_value": comp.get("p_value"),
            "p_test": comp.get("p_test"), "p_exact": comp.get("p_exact"), "items": comp.get("items"),
            "p_value_bootstrap_z": comp.get("p_value_bootstrap_z")}


def _input_side(mg: dict) -> dict:
    return {"margin_observer_input_side": margin(mg.get("observer_input_side"))}


def _verdict_cell(r: dict) -> str:
    if not r.get("verdict"):
        return "n/a"
    from tamperbench.owmi.score.verdict import VERDICTS

    p = "n/a" if r["p_value"] is None else f"{r['p_value']:.3g}{'' if r['p_exact'] else ' (Monte Carlo)'}"
    return f"`{r['verdict']}`: {esc(VERDICTS[r['verdict']])} (p = {p}; {esc(r['verdict_reason'])})"


def _inclusive(r: dict) -> str:
    if r.get("inclusive_parsed_pairs") == 0:
        return f"{NO_PARSED} ({r['inclusive_pairs']} pairs, every row unparsed)"
    return f"{num(r['inclusive_dprime'])} / {num(r['inclusive_auroc'])} ({r['inclusive_pairs']})"


def to_markdown(result: dict) -> str:
    who = identity.result_labels(result)
    L = ["# OWMI score", "", f"Runs: {', '.join(esc(r) for r in result['runs'])} ({result['n_rows']} analysable rows; "
         f"{len(result['excluded_runs'])} excluded for unrecorded required fields)", ""]
    if result.get("readouts"):  # how the reports were read: a verbal and a token-level read-out never share a cell
        L += ["## Read-outs (part of every cell: never pooled)", ""]
        L += [f"- {esc(name)}: {READOUTS.get(name, 'unknown read-out')}" for name in result["readouts"]] + [""]
    L += ["## Reportability profile (per model and cell; never collapsed into one number)", "",
          "| model | cell | d' | AUROC | margin vs random | margin vs observer |", "|---|---|---|---|---|---|"]
    for r in detection_rows(result):
        L.append(f"| {esc(r['identity'])} | {esc(r['cell'])} | {num(r['dprime'])} | {num(r['auroc'])} | {r['margin_random']}"
                 f"{' (' + r['random_kind'] + ')' if r['random_kind'] else ''} | {r['margin_observer']} |")
    L += ["", "## Detection against paired sham (complete-pair primary; inclusive coding as robustness)", "",
          "Verdict (two-sided): `exceeds_sham`, `below_sham` (reports move against the intervention: a disturbance, not "
          "detection), `bounded` (TOST) or `undetermined`; p from the paired sign-flip permutation test over item "
          "clusters (exact up to 16 items), BH over the cells with at least the item floor of distinct items.", "",
          "| model | cell | pairs | items | d' [95% CI] | AUROC [95% CI] | BH q | verdict | inclusive d' / AUROC (pairs) | "
          "parsed/attempted | excluded pairs |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in detection_rows(result):
        L.append(f"| {esc(r['identity'])} | {esc(r['cell'])} | {r['pairs']} | {r['items']} | {num(r['dprime'])} {r['dprime_ci']} | "
                 f"{num(r['auroc'])} {r['auroc_ci']} | {num(r['bh_q'])} | {_verdict_cell(r)} | {_inclusive(r)} | "
                 f"{esc(r['parse'])} | {esc(r['excluded'])} |")
    L += ["", "### Pooled (labelled pools, for precision only)", ""]
    for p in result["pooled"]:
        c = p["complete"]
        pv = c.get("verdict")
        L.append(f"- {esc(p['pool'])}: {c['pairs']} pairs, d' = {num(c['dprime'])} {ci(c['dprime_ci'])}, "
                 f"AUROC = {num(c['auroc'])} {ci(c['auroc_ci'])}"
                 + (f", verdict `{pv['name']}` ({esc(pv['reason'])})" if pv else "") + "; inclusive coding d' = "
                 + (NO_PARSED if p["inclusive"].get("parsed_pairs") == 0 else
                    f"{num(p['inclusive']['dprime'])} (shift {num(p['shift_inclusive_minus_complete'])})"))
    note = result.get("all_models_pool")
    if note:
        L.append(f"- all-models pools: {', '.join(esc(f) for f in note['formed']) or 'none'} ({esc(note['reason'])})")
    L += ["", "## Equivalence bound (TOST inverted: tightest AUROC margin the data support)", ""]
    for p in result["pooled"]:
        eq = p["complete"].get("equivalence") or []
        if eq:
            L.append(f"- {esc(p['pool'])}: " + "; ".join(
                f"below {100 * e['bound']:.3f} pp at alpha {e['alpha']:g}" for e in eq))
        elif p["complete"].get("no_bound_reason"):
            L.append(f"- {esc(p['pool'])}: no bound: {esc(p['complete']['no_bound_reason'])}")
    for c in result["cells"]:
        eq = (c.get("detection") or {}).get("complete", {}).get("equivalence") or []
        if eq and c["cell"]["probe_family"] == "detection":
            L.append(f"- {esc(who[identity.of(c['cell'])])} · {esc(cell_label(c['cell']))}: " + "; ".join(
                f"below {100 * e['bound']:.3f} pp at alpha {e['alpha']:g}" for e in eq))
    L += ["", "## Verbalised confidence (Brier, equal-mass ECE, selective-prediction AUROC)", "",
          "| model | cell | n | accuracy | Brier | ECE (10 equal-mass bins) | selective AUROC |", "|---|---|---|---|---|---|---|"]
    for c in result["cells"]:
        k = c.get("confidence")
        if k:
            L.append(f"| {esc(who[identity.of(c['cell'])])} | {esc(cell_label(c['cell']))} | {k['n']} | {num(k['accuracy'], 3)} | "
                     f"{num(k['brier'])} | {num(k['ece_equal_mass_10'])} | {num(k['selective_auroc'])} |")
    L += ["", "## Sensitivity anchors", ""]
    if not result["anchors"]:
        L.append("- none given (pass anchor run directories from `owmi probe` / `owmi known-positive` as RUN arguments)")
    for a in result["anchors"]:
        if a["kind"] == "probe":
            L.append(f"- linear probe, {esc(_anchor_weights(a, who))} at {a['site']} ({a['train_items']} train / {a['test_items']} test items; "
                     f"rule: {a['rule']}): m_probe = {a['m_probe']:+.3f}, passes = {a['passes']}")
            for lay in a["layers"]:
                band = ci(lay.get("null_band"), 3)
                acc = (f"no held-out error in {lay['n_test']} (an absence of errors, not an accuracy estimate)"
                       if lay["errors"] == 0 else f"accuracy {lay['accuracy']:.3f} ({lay['errors']} errors in {lay['n_test']})")
                L.append(f"  - read at layer {lay['read_layer']}: {acc}, null 95% band {band}, passes = {lay['passes']}, "
                         f"source rule (max |null| < 0.1, mis-specified) = {lay.get('source_rule_pass')}")
        elif a["kind"] == "known_positive_check":
            L.append(f"- {esc(check_line(a, _anchor_weights(a, who)))}")
        else:
            L.append(f"- known positive (the anchor's own token-level diagnostic, evaluate(); the claims read the check "
                     f"through owmi run), {esc(_anchor_weights(a, who))} at {a['site']}: {a['n_heldout']} held-out directions "
                     f"(seeds {a['heldout_seeds'][0]}..{a['heldout_seeds'][1]}, disjoint from training: "
                     f"{a['disjoint']['at_evaluation']}); hits {a['hits']}/{a['n_heldout']}, false alarms "
                     f"{a['false_alarms']}/{a['n_heldout']}; d' = {a['dprime']['estimate']:.4f}, AUROC = "
                     f"{a['auroc']['estimate']:.4f} {ci(a['auroc']['ci'])}; error rate {a['errors']}/{a['n_trials']}, "
                     f"one-sided 95% bound {a['error_rate_upper95']:.4f}; passes = {a['passes']}")
    L += ["", "## Dose-response and leakage (Eq. 10-11)", "", f"- dose model, ours (simplified): {esc(DOSE_MODEL['ours'])}",
          f"- the paper's form (owmi score --dose-model paper fits it): {esc(DOSE_MODEL['paper'])}"]
    if not result["ladders"]:
        L.append("- no dose ladder (fewer than two doses in every cell): m0 and lambda not estimable")
    for lad in result["ladders"]:
        m0 = lad.get("m0")
        L.append(f"- {esc(who[identity.of(lad['cell'])])} {esc(lad['cell'].get('site'))}: m0 = "
                 f"{num(m0['estimate']) if isinstance(m0, dict) else 'n/a'} "
                 f"{ci(m0['ci']) if isinstance(m0, dict) else ''}; identified = {lad.get('identified')}; "
                 f"stratified = {lad.get('stratified')}; {esc(lad.get('reason', ''))}")
    if result.get("paper_ladders") is not None:
        from tamperbench.owmi.score.dose_paper import markdown as paper_markdown

        L += paper_markdown(result["paper_ladders"])  # escapes its untrusted fields itself
    L += ["", "## Variance components (crossed: domain, object, item, seed)", ""]
    for v in result["variance"].values():
        if not v.get("estimable"):
            L.append(f"- {esc(v['label'])}: not estimable ({v['reason']}; {v['pairs']} pairs)")
        else:
            L.append(f"- {esc(v['label'])}: " + "; ".join(f"ICC_{k} = {d['estimate']:.3f} {ci(d['ci'], 3)}" for k, d in v["icc"].items())
                     + "; " + "; ".join(f"Delta_{k} = {d['estimate']:+.3f} {ci(d['ci'], 3)}" for k, d in v["delta"].items()))
    from tamperbench.owmi.score.decay import decay_markdown

    L += decay_markdown(result)
    from tamperbench.owmi.score.closedset import closedset_markdown
    from tamperbench.owmi.score.damage import audit_markdown
    from tamperbench.owmi.score.reconstruction import reconstruction_markdown

    L += reconstruction_markdown(result)
    L += closedset_markdown(result)
    L += audit_markdown(result)
    from tamperbench.owmi.score.dose_damage import dose_markdown

    L += dose_markdown(result)
    L += ["", "## Claim verdicts (Appendix D.5)", ""]
    for m in result["model_claims"]:
        L.append(f"- **{esc(m['label'])}** (model level): {esc(m['structure'])}; {esc(m['decay'])}")
    for c in result["cells"]:
        if "claim" in c:
            v = c["claim"]
            rho = c.get("rho")
            L.append(f"- **{esc(who[identity.of(c['cell'])])} · {esc(cell_label(c['cell']))}** - level {v['level']}: {v['claim']}")
            for tag, items in (("held", v["held"]), ("failed", v["failed"]), ("not measured", v["not_measured"])):
                for it in items:
                    L.append(f"  - {tag}: {esc(it)}")
            if rho:
                L.append(f"  - extraction ratio rho = {num(rho.get('rho'))} {ci(rho.get('ci'))} {esc(rho.get('reason', ''))}")
    return "\n".join(drop_empty_sections(L)) + "\n"


def _write_csv(path: Path, rows: list[dict], empty_fields: list[str]) -> None:
    """``rows`` as CSV, header from the first row (``empty_fields`` when there is none)."""
    with atomic_open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else empty_fields)
        w.writeheader()
        w.writerows(rows)


def save(result: dict, out: Path) -> dict[str, Path]:
    from tamperbench.owmi.score.closedset import closedset_rows
    from tamperbench.owmi.score.damage import audit_rows
    from tamperbench.owmi.score.decay import decay_rows
    from tamperbench.owmi.score.reconstruction import reconstruction_rows

    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "owmi_score.md", "csv": out / "owmi_detection.csv", "json": out / "owmi_score.json",
             "decay_csv": out / "owmi_decay.csv", "reconstruction_csv": out / "owmi_reconstruction.csv",
             "closedset_csv": out / "owmi_closedset.csv", "damage_csv": out / "owmi_damage.csv"}
    atomic_write(paths["markdown"], to_markdown(result))
    _write_csv(paths["csv"], detection_rows(result), ["model", "cell", "pairs"])
    _write_csv(paths["decay_csv"], decay_rows(result), ["model", "cell", "contrast"])
    _write_csv(paths["reconstruction_csv"], reconstruction_rows(result), ["model", "cell", "scoring"])
    _write_csv(paths["closedset_csv"], closedset_rows(result), ["model", "cell", "family"])
    _write_csv(paths["damage_csv"], audit_rows(result), ["model", "cell", "corrupted"])
    atomic_write(paths["json"], json.dumps(result, indent=1, default=str, allow_nan=True))
    return paths
