"""The reconstruction family: rule-scored margins per cell and the Eq. 17 contrast (App. C.4, D.2).

The paper defines the margins for every probe family q (Eq. 8), mu^rand_q = E[s_int - s_rand] and
mu^obs_q = E[s_int - max_w s_obs,w], and the contrast "sensitivity without semantic access" (Eq. 17):
Delta^det_c > 0 and mu^obs_reconstruction,c <= 0. It could not compute the reconstruction side (no
ground-truth label, D.3). Our engine records the injected concept, so here s_q is the rule of
``recon_rule`` (1 = the report names the pair's injected concept, 0 = it names another), and:

* **intervention** is scored against the concept its own run injected (``concept`` of the
  intervention row: what was done, not what a control row claims).
* **sham** is scored against that same label. Nothing was injected, so its hit rate is the rate at
  which the model names that concept anyway; a model that always answers "ocean" hits as often in
  sham as under intervention and gets a zero margin, which scoring sham as 0 would hide.
* **random_matched / random_unit** likewise: a random direction carries no concept, so the hit rate
  is guessing under generic disruption of the same size (Eq. 8, mu^rand).
* **observer** tiers (third person: "which concept was pushed into the model that produced the
  record") are scored against the label, and the pair takes the max over the tiers that parsed:
  the observer bound of Eq. 8 (``stats.pairs.control_margin``, the same code as detection's).
* A pair whose intervention row records no concept (non-``add`` operators) has no ground truth and
  is dropped as ``no_concept_label``; a control row naming another concept than its pair's
  intervention row is an inconsistent record, and its pair is dropped as ``concept_mismatch``. Both
  are counted, never repaired.

Unparseable reports follow D.4 through the existing machinery (``score.detection_entry`` on a view
of the rows whose ``detected`` is the rule's verdict): excluded with their pair in the complete-pair
coding (primary), zero report evidence in the inclusive one (robustness); parse rates beside them count
every attempted row of the cell, the unscorable pairs' rows included.
Intervals are the same item-clustered bootstrap as the detection margins. The reconstruction margins
are not Benjamini-Hochberg controlled (no claim here rests on them alone: D.3 needs human validation).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from tamperbench.owmi.score import identity
from tamperbench.owmi.score.fmt import NO_PARSED, cell_label, ci, esc, margin, num, parse_line
from tamperbench.owmi.score.recon_rule import PAPER, RULE, concept_key, names_concept

JOINT_FIELDS = ("model", "model_revision", "dtype", "quantized", "benchmark", "site", "operator", "dose", "track",
                "hook_scope", "readout")  # score.CELL_FIELDS less the probe family: a detection cell and its reconstruction cell
CONTROLS = ("random_matched", "random_unit", "observer")
_CONTROL_OF = {"random_matched": ("random_matched",), "random_unit": ("random_unit",), "observer": ("observer",),
               "observer_input_side": ("observer",)}  # Track A: the prompt-only observer (Section 3.4)


def scored_view(rows: list[dict]) -> tuple[list[dict], Counter]:
    """Copies of the reconstruction rows whose ``detected`` is the rule's verdict against the pair's label
    (``graded`` cleared so the score is that binary verdict), and the pairs dropped without ground truth.

    ``parse_ok`` stays as recorded, except that a parsed row with no report text reads as unparsed."""
    by_pair: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_pair[r["pair_id"]].append(r)
    out: list[dict] = []
    dropped: Counter = Counter()
    for _pid, rs in sorted(by_pair.items()):
        ints = [r for r in rs if r["condition"] == "intervention"]
        label = concept_key(ints[0].get("concept")) if ints else None
        if ints and label is None:
            dropped["no_concept_label"] += 1
            continue
        if label is not None and any(concept_key(r.get("concept")) not in (None, label) for r in rs):
            dropped["concept_mismatch"] += 1
            continue
        for r in rs:
            ok = bool(r.get("parse_ok")) and concept_key(r.get("concept_report")) is not None
            hit = names_concept(r.get("concept_report"), label) if ok and label is not None else None
            out.append({**r, "parse_ok": ok, "detected": hit, "graded": None, "confidence": None})
    return out, dropped


def inclusive_view(view: list[dict]) -> list[dict]:
    """D.4 inclusive coding: an unparseable report is kept as zero report evidence (a wrong answer)."""
    return [r if r["parse_ok"] else {**r, "parse_ok": True, "detected": False} for r in view]


def _accuracy(view: list[dict]) -> dict[str, dict]:
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in view:
        if r["parse_ok"] and r["detected"] is not None:
            t = tally[r["condition"] if r["condition"] != "observer" else f"observer tier {r.get('observer_tier')}"]
            t[0] += bool(r["detected"])
            t[1] += 1
    return {k: {"correct": c, "scored": n, "rate": c / n} for k, (c, n) in sorted(tally.items())}


def _contrast(e: dict) -> dict:
    return {"pairs": e["pairs"], "items": e["items"], "excluded": e["excluded"], "margin": e["margin"],
            "margin_ci": e["margin_ci"], "accuracy_intervention": e["hit_rate"], "accuracy_sham": e["false_alarm_rate"],
            "dprime": e["dprime"], "auroc": e["auroc"], "auroc_ci": e["auroc_ci"],
            **({"parsed_pairs": e["parsed_pairs"]} if "parsed_pairs" in e else {})}


def reconstruction_entry(rows: list[dict], n_boot: int, seed: int) -> dict:
    """Rule-scored margins of one reconstruction cell: vs sham (both codings), vs random and vs the
    observer bound (both codings), parse rates, per-condition accuracy, closed-set chance."""
    from tamperbench.owmi.score.score import detection_entry, parsed_pairs
    from tamperbench.owmi.protocol.probes import concepts
    from tamperbench.owmi.score.observers import tier_parse_rates

    view, dropped = scored_view(rows)
    comp = detection_entry(view, n_boot, seed)
    inc = detection_entry(inclusive_view(view), n_boot, seed)
    for label, m in inc["margins"].items():  # the inclusive view marks every row parsed: count on the real view
        m["parsed_pairs"] = parsed_pairs(view, "intervention", _CONTROL_OF[label])
    k = len(concepts())
    return {"rule": RULE, "paper": PAPER, "runs": len(rows), "unscorable_pairs": dict(dropped),
            "vs_sham": {"complete": _contrast(comp["complete"]), "inclusive": _contrast(comp["inclusive"])},
            "margins": {"complete": comp["margins"], "inclusive": inc["margins"]},
            "parse_rates": tier_parse_rates(rows), "accuracy": _accuracy(view),
            "chance": {"closed_set": k, "rate": 1.0 / k if k else None}}


VALIDATION_FIELDS = {"raters": int, "sample_size": int, "threshold": float, "agreement": float}


MAX_VALIDATION_BYTES = 64 * 1024


def load_validation(path) -> dict:
    """A human validation of the reconstruction rule (D.3) from a JSON object file: ``raters``,
    ``sample_size`` (integers), ``threshold`` and ``agreement`` (numbers in 0..1), optional ``note``.
    A bad file is one ``UserError`` naming the file and field, never a default."""
    import json
    import math
    from pathlib import Path

    from tamperbench.errors import UserError

    p = Path(path)
    try:
        if p.stat().st_size > MAX_VALIDATION_BYTES:  # four numbers and a note: a bigger file is not one
            raise UserError(f"--recon-validation: {p}: larger than {MAX_VALIDATION_BYTES:,} bytes")
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UserError(f"--recon-validation: {p}: not a readable JSON file ({type(err).__name__})") from None
    if not isinstance(data, dict):
        raise UserError(f"--recon-validation: {p}: expected a JSON object")
    out: dict = {}
    for k, typ in VALIDATION_FIELDS.items():
        v = data.get(k)
        # JSON's NaN / Infinity parse as floats: refused here (int(inf) would raise OverflowError)
        if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                or (typ is int and v != int(v))):
            raise UserError(f"--recon-validation: {p}: field {k!r} must be {'an integer' if typ is int else 'a number'}")
        if typ is float and not 0 <= v <= 1:
            raise UserError(f"--recon-validation: {p}: field {k!r} must be in 0..1")
        out[k] = typ(v)
    if "note" in data:
        out["note"] = str(data["note"])[:500]
    out["file"] = str(p)
    return out


def joint_key(cell: dict) -> tuple:
    return tuple(identity.value(cell, f) for f in JOINT_FIELDS)


def eq17(det: dict | None, recon: dict | None, exceeds_sham: bool | None) -> dict:
    """Eq. 17 for one cell: Delta^det_c > 0 and mu^obs_reconstruction,c <= 0, read two ways.

    ``literal``: the paper's ordinal event on point estimates (Delta^det = hit rate - false-alarm rate
    of the complete pairs, Eq. 20; mu^obs the rule-scored observer margin). ``decision``: what the
    claim rule uses, detection exceeding sham (``claims.exceeds_sham``: AUROC interval above 0.5, BH)
    and the observer margin's interval not above zero (not shown to beat the bound). None: a side
    is not measured."""
    c = (det or {}).get("complete") or {}
    obs = ((recon or {}).get("margins") or {}).get("complete", {}).get("observer")
    d_est = c.get("margin") if c.get("pairs") else None
    lit = None if d_est is None or obs is None else bool(d_est > 0 and obs["estimate"] <= 0)
    if exceeds_sham is False or (obs is not None and obs["ci"][0] > 0):
        dec: bool | None = False
    else:
        dec = None if exceeds_sham is None or obs is None else True
    return {"delta_det": d_est, "mu_obs_reconstruction": obs, "literal": lit, "decision": dec,
            "detection_exceeds_sham": exceeds_sham}


def scoring(result: dict) -> str:
    """How the reconstruction scores of ``result`` stand: rule-scored, human-validated or not (D.3)."""
    from tamperbench.owmi.score.claims import validation_passes

    v = (result.get("reconstruction") or {}).get("human_validation")
    return "rule-scored, human-validated" if validation_passes(v) else "rule-scored, not human-validated"


def _validation_line(result: dict) -> str:
    from tamperbench.owmi.score.claims import validation_passes

    v = (result.get("reconstruction") or {}).get("human_validation")
    if v is None:
        return "human validation (D.3): none supplied, so no claim rests on reconstruction"
    return (f"human validation (D.3): {v.get('raters')} raters, {v.get('sample_size')} items, agreement "
            f"{v.get('agreement')} vs threshold {v.get('threshold')} fixed in advance, as stated in {v.get('file')} "
            f"(not recomputed here); passes = {validation_passes(v)}")


def reconstruction_rows(result: dict) -> list[dict]:
    """One flat row per reconstruction cell (CSV, Markdown, site), identity fields last."""

    labels = identity.result_labels(result)
    how = scoring(result)
    out = []
    for c in result["cells"]:
        r = c.get("reconstruction")
        if not r:
            continue
        vs = r["vs_sham"]["complete"]
        mc, mi = r["margins"]["complete"], r["margins"]["inclusive"]
        e17 = c.get("eq17") or {}
        rnd = "random_matched" if "random_matched" in mc else "random_unit"
        out.append({"model": c["cell"]["model"], "dtype": c["cell"]["dtype"], "cell": cell_label(c["cell"]),
                    "scoring": how, "pairs_vs_sham": vs["pairs"],
                    "accuracy_intervention": vs["accuracy_intervention"], "accuracy_sham": vs["accuracy_sham"],
                    "margin_sham": vs["margin"], "margin_sham_ci": ci(vs["margin_ci"]),
                    "inclusive_margin_sham": (NO_PARSED if r["vs_sham"]["inclusive"].get("parsed_pairs") == 0
                                              else r["vs_sham"]["inclusive"]["margin"]),
                    "margin_random": margin(mc.get(rnd)), "random_kind": rnd if rnd in mc else "",
                    "margin_observer": margin(mc.get("observer")),
                    "inclusive_margin_observer": margin(mi.get("observer")),
                    "observer_tiers": (mc.get("observer") or {}).get("observer_tiers"),
                    "chance": r["chance"]["rate"],
                    "unscorable_pairs": ", ".join(f"{k} {v}" for k, v in sorted(r["unscorable_pairs"].items())),
                    "parse": parse_line(r["parse_rates"]),
                    "eq17_literal": e17.get("literal"), "eq17_decision": e17.get("decision"),
                    "model_revision": c["cell"].get("model_revision"), "quantized": bool(c["cell"].get("quantized")),
                    "identity": labels[identity.of(c["cell"])]})
    return out


def _signed(x) -> str:

    return num(x) if num(x) == "n/a" or isinstance(x, str) else f"{x:+.4f}"


def reconstruction_markdown(result: dict) -> list[str]:
    """The Markdown section of ``owmi score``: paper rule and ours named, one row per cell (Eq. 17
    events read yes / no, n/a where it was not formed; the CSV keeps the raw values)."""

    rows = reconstruction_rows(result)
    if not rows:
        return []
    L = ["", f"## Reconstruction ({scoring(result)}; Eq. 8 margins and Eq. 17)", "",
         f"- {esc(PAPER)}", f"- ours: {esc(RULE)}", f"- {esc(_validation_line(result))}", "- Eq. 17 (sensitivity without semantic access): detection beats "
         "sham and reconstruction does not beat the observer bound; *literal* = the paper's event on point "
         "estimates, *decision* = the intervals the claim rule reads", "",
         "| model | cell | pairs | accuracy int / sham | margin vs sham [95% CI] | margin vs random | margin vs observer "
         "(max over tiers) | inclusive: vs sham / vs observer | chance | parsed/attempted | unscorable pairs | "
         "Eq. 17 literal / decision |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {esc(r['identity'])} | {esc(r['cell'])} | {r['pairs_vs_sham']} | {num(r['accuracy_intervention'], 3)} / "
                 f"{num(r['accuracy_sham'], 3)} | {_signed(r['margin_sham']) + ' ' + r['margin_sham_ci'] if r['pairs_vs_sham'] else 'n/a'} | {r['margin_random']}"
                 f"{' (' + r['random_kind'] + ')' if r['random_kind'] else ''} | {r['margin_observer']} | "
                 f"{_signed(r['inclusive_margin_sham'])} / {r['inclusive_margin_observer']} | {num(r['chance'], 3)} | "
                 f"{esc(r['parse'])} | {esc(r['unscorable_pairs'] or 'none')} | {_yes_no(r['eq17_literal'])} / {_yes_no(r['eq17_decision'])} |")
    return L


def _yes_no(event: bool | None) -> str:
    return "n/a" if event is None else ("yes" if event else "no")
