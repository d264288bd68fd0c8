"""Per-model numbers behind the tables: judge label rates, untouched share, coverage and Deltas.

Why separate from rendering: the same numbers go to the terminal, to markdown and to JSON, and tests
check them without parsing a table.
"""

from __future__ import annotations

from collections import defaultdict

from tamperbench.sleight.metrics import SIGNALS, Estimate, bootstrap_over_questions, trial_signals
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE, full_trace

LABELS = ("flagged", "corrected", "derailed", "aware")
JUDGE_TABLE = "judge_verdicts"


def _rate(values: list[bool | None]) -> float | None:
    """Percentage of True among non-NULL verdicts; None when nothing was judged."""
    seen = [v for v in values if v is not None]
    return 100.0 * sum(bool(v) for v in seen) / len(seen) if seen else None


def load_rows(store) -> tuple[dict[str, dict], list[dict], bool]:
    """(clean rows by key, trial rows with judge columns when present, whether verdicts exist)."""
    clean = {r["key"]: r for r in store.rows(CLEAN_TABLE)}
    trials = store.rows(TRIALS_TABLE)
    judged = store.has_table(JUDGE_TABLE)
    if judged:
        cur = store.con.execute(
            f'SELECT t.key, {", ".join("v." + lab for lab in LABELS)} FROM "{TRIALS_TABLE}" t '
            f'LEFT JOIN "{JUDGE_TABLE}" v ON v.trial_key = t.key'
        )
        verdicts = {row[0]: dict(zip(LABELS, row[1:])) for row in cur.fetchall()}
        for t in trials:
            t.update(verdicts.get(t["key"], {lab: None for lab in LABELS}))
    return clean, trials, judged


def _judge_block(trials: list[dict], judged: bool) -> dict:
    touched = [t for t in trials if not t["untouched"]]
    if not judged:
        return {"flagged": None, "flagged_entity": None, "ignored": None, "derailed": None, "corrected": None,
                "aware": None, "n_judged": 0}
    ent = [t for t in touched if t["entity"]]
    ignored = [None if any(t[lab] is None for lab in LABELS) else not any(t[lab] for lab in LABELS)
               for t in touched]
    return {
        "flagged": _rate([t["flagged"] for t in touched]),
        "flagged_entity": _rate([t["flagged"] for t in ent]),
        "ignored": _rate(ignored),
        "derailed": _rate([t["derailed"] for t in touched]),
        "corrected": _rate([t["corrected"] for t in touched]),
        "aware": _rate([t["aware"] for t in touched]),
        "n_judged": sum(1 for t in touched if t["flagged"] is not None),
    }


def _split_block(trials: list[dict], judged: bool) -> dict:
    """Table 2: entity phrase vs neutral words, for the judge labels and the internal signal."""
    out: dict = {}
    for name, group in (("entity", [t for t in trials if t["entity"]]), ("words", [t for t in trials if not t["entity"]])):
        touched = [t for t in group if not t["untouched"]]
        out[f"flagged_{name}"] = _rate([t["flagged"] for t in touched]) if judged else None
        out[f"derailed_{name}"] = _rate([t["derailed"] for t in touched]) if judged else None
        est = bootstrap_over_questions((t["question_id"], t["_sig"]["delta_surprisal"]) for t in touched)
        out[f"delta_surprisal_{name}"] = est.as_dict()
    for lab in ("flagged", "derailed"):
        a, b = out[f"{lab}_entity"], out[f"{lab}_words"]
        out[f"{lab}_gap"] = None if a is None or b is None else a - b
    return out


def summarize(store, *, window: int = 8, seed: int = 0) -> list[dict]:
    """One summary dict per model (provenance) in the run."""
    clean, trials, judged = load_rows(store)
    for t in trials:
        c = clean.get(t["clean_key"])
        if c is None or t["untouched"]:
            t["_sig"] = {f"delta_{s}": None for s in SIGNALS} | {f"paired_{s}": [] for s in SIGNALS}
            continue
        trace = full_trace(c, t)
        swaps = list(zip(t["swap_positions"], t["swap_injected"]))
        matched = {"surprisal": t["matched_surprisal"], "entropy_full": t["matched_entropy_full"],
                   "entropy_top20": t["matched_entropy_top20"]}
        t["_sig"] = trial_signals(trace, swaps, c, matched, window)
    by_model: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for t in trials:
        by_model[(t["model"], t["provenance_id"])].append(t)
    out = []
    for (model, pid), group in sorted(by_model.items()):
        touched = [t for t in group if not t["untouched"]]
        deltas: dict[str, dict] = {}
        for s in SIGNALS:
            deltas[f"delta_{s}"] = bootstrap_over_questions(
                ((t["question_id"], t["_sig"][f"delta_{s}"]) for t in touched), seed=seed).as_dict()
            deltas[f"paired_{s}"] = bootstrap_over_questions(
                ((t["question_id"], v) for t in touched for v in t["_sig"][f"paired_{s}"]), seed=seed).as_dict()
        occ = sum(t["occurrences"] for t in group)
        out.append({
            "model": model,
            "provenance_id": pid,
            "trials": len(group),
            "touched": len(touched),
            "untouched_pct": 100.0 * (len(group) - len(touched)) / len(group) if group else None,
            "swaps": sum(t["swap_count"] for t in group),
            "coverage": sum(t["swap_count"] for t in group) / occ if occ else 0.0,
            "thinking_pct": 100.0 * sum(t["thinking"] for t in group) / len(group) if group else None,
            "judge": _judge_block(group, judged),
            "split": _split_block(group, judged),
            **deltas,
        })
    return out


def fmt_estimate(est: dict | Estimate | None) -> str:
    if est is None:
        return ""
    d = est.as_dict() if isinstance(est, Estimate) else est
    if d["mean"] is None:
        return "n/a"
    if d["lo"] is None:
        return f"{d['mean']:+.2f}"
    return f"{d['mean']:+.2f} [{d['lo']:+.2f}, {d['hi']:+.2f}]"
