"""Per-model numbers behind the tables: judge label rates, untouched share, coverage and Deltas.

Why separate from rendering: the same numbers go to the terminal, to markdown and to JSON, and tests
check them without parsing a table.

Deltas: ``delta_<signal>`` follows the reference rule (see ``metrics``). Judge labels
and the "ignored" rule come from ``tamperbench.labels``, the same definitions ``judge run`` uses.
``paper_counts`` holds the raw counts the paper's own table script divides (so ``--layout paper``
rounds exactly as the paper did, and pooled rows sum counts over models).
"""

from __future__ import annotations

import json
from collections import defaultdict

from tamperbench.labels import (
    JUDGE_LABELS,
    JUDGE_PARSE_RATES_TABLE,
    JUDGE_VERDICTS_TABLE,
    JUDGE_VOTES_TABLE,
    JUDGED_TEXT_RULE_TEXT,
    PARSE_RULE_TEXT,
    UNPARSED_RULE_TEXT,
    ignored_from,
    judge_decoding_text,
)
from tamperbench.sleight.metrics import RULE_TEXT, SIGNALS, Estimate, bootstrap_over_questions, model_estimate, trial_signals
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE, full_trace

LABELS = JUDGE_LABELS
JUDGE_TABLE = JUDGE_VERDICTS_TABLE


def _rate(values: list[bool | None]) -> float | None:
    """Percentage of True among non-NULL verdicts; None when nothing was judged."""
    seen = [v for v in values if v is not None]
    return 100.0 * sum(bool(v) for v in seen) / len(seen) if seen else None


def _count(values: list[bool | None]) -> dict:
    """A rate's numerator and denominators: ``k`` true of ``n`` with a majority, of ``judged`` (a verdict row)."""
    seen = [v for v in values if v is not None]
    return {"k": sum(bool(v) for v in seen), "n": len(seen)}


def _columns(store, table: str) -> set[str]:
    q = "SELECT column_name FROM information_schema.columns WHERE table_name = ?"
    return {c for (c,) in store.con.execute(q, [table]).fetchall()}


def load_rows(store) -> tuple[dict[str, dict], list[dict], bool]:
    """(clean rows by key, trial rows with judge columns when present, whether verdicts exist)."""
    clean = {r["key"]: r for r in store.rows(CLEAN_TABLE)}
    trials = store.rows(TRIALS_TABLE)
    judged = store.has_table(JUDGE_TABLE)
    if judged:
        cur = store.con.execute(
            f'SELECT t.key, v.trial_key IS NOT NULL, {", ".join("v." + lab for lab in LABELS)} FROM "{TRIALS_TABLE}" t '
            f'LEFT JOIN "{JUDGE_TABLE}" v ON v.trial_key = t.key'
        )
        verdicts = {row[0]: {"_judged": bool(row[1]), **dict(zip(LABELS, row[2:]))} for row in cur.fetchall()}
        for t in trials:
            t.update(verdicts.get(t["key"], {"_judged": False, **{lab: None for lab in LABELS}}))
    return clean, trials, judged


def judge_setup(store) -> dict | None:
    """Which fence and unparsed-vote rule produced the verdicts, with per-judge parse rates (None: not judged)."""
    if not store.has_table(JUDGE_TABLE):
        return None
    cols = _columns(store, JUDGE_TABLE)
    rules = sorted({r for (r,) in store.con.execute(f'SELECT DISTINCT unparsed_rule FROM "{JUDGE_TABLE}"').fetchall()}) \
        if "unparsed_rule" in cols else ["abstain"]
    configs = [c for (c,) in store.con.execute(f'SELECT DISTINCT config_id FROM "{JUDGE_TABLE}"').fetchall()] \
        if "config_id" in cols else []
    fences: list[str] = []
    if store.has_table(JUDGE_VOTES_TABLE) and configs:
        marks = ", ".join("?" for _ in configs)
        fences = sorted({f for (f,) in store.con.execute(
            f'SELECT DISTINCT fence FROM "{JUDGE_VOTES_TABLE}" WHERE config_id IN ({marks})', configs).fetchall()})
    rates: dict[str, dict] = {}
    if store.has_table(JUDGE_PARSE_RATES_TABLE) and configs:
        marks = ", ".join("?" for _ in configs)
        for r in store.rows(JUDGE_PARSE_RATES_TABLE, f"WHERE config_id IN ({marks})", configs):
            n = r["n_votes"]
            parsed = r["n_parsed"] + r["n_parsed_on_retry"]
            # parse_rate: votes read in full; a partial vote (a label missing) and an unparsed one have their own rates
            rates[r["judge"]] = {"n_votes": n, "parsed": parsed, "partial": r["n_partial"], "unparsed": r["n_unparsed"],
                                 "parse_rate": 100.0 * parsed / n if n else None,
                                 "partial_rate": 100.0 * r["n_partial"] / n if n else None,
                                 "unparsed_rate": 100.0 * r["n_unparsed"] / n if n else None}
    judges = _judge_settings(store, configs)
    parse = sorted({j["parse_rule"] for j in judges.values()})
    texts = sorted({j["judged_text"] for j in judges.values()})
    decoding: list[str] = []  # named only when some vote was grammar-constrained (judge run --constrained)
    if store.has_table(JUDGE_VOTES_TABLE) and configs and "grammar" in _columns(store, JUDGE_VOTES_TABLE):
        marks = ", ".join("?" for _ in configs)
        grammars = [g for (g,) in store.con.execute(
            f'SELECT DISTINCT grammar FROM "{JUDGE_VOTES_TABLE}" WHERE config_id IN ({marks})', configs).fetchall()]
        decoding = sorted({judge_decoding_text(g) for g in grammars}) if any(grammars) else []
    return {"fence": fences, "unparsed_rule": rules, "decoding": decoding, "unparsed_rule_text": [UNPARSED_RULE_TEXT[r] for r in rules
                                                                          if r in UNPARSED_RULE_TEXT],
            "parse_rule": parse, "parse_rule_text": [PARSE_RULE_TEXT[r] for r in parse if r in PARSE_RULE_TEXT],
            "judged_text": texts, "judged_text_rule": [JUDGED_TEXT_RULE_TEXT[t] for t in texts
                                                       if t in JUDGED_TEXT_RULE_TEXT],
            "judges": judges, "parse_rates": rates}


_SETTING_DEFAULTS = {"parse_rule": "robust", "judged_text": "safe", "thinking": "default"}


def _judge_settings(store, configs: list[str]) -> dict[str, dict]:
    """Per judge: the parse rule, judged text and thinking setting its votes were made under (columns
    NULL in votes stored before they existed read as the defaults then in force)."""
    if not (store.has_table(JUDGE_VOTES_TABLE) and configs):
        return {}
    have = _columns(store, JUDGE_VOTES_TABLE)
    cols = [c for c in ("parse_rule", "judged_text", "thinking", "template_kwargs", "thinking_effect", "max_new_tokens")
            if c in have]
    marks = ", ".join("?" for _ in configs)
    rows = store.con.execute(f'SELECT DISTINCT judge, {", ".join(cols)} FROM "{JUDGE_VOTES_TABLE}" '
                             f"WHERE config_id IN ({marks}) ORDER BY judge", configs).fetchall()
    out: dict[str, dict] = {}
    for judge, *vals in rows:
        got = dict(zip(cols, vals))
        setting = {k: got.get(k) or d for k, d in _SETTING_DEFAULTS.items()}
        kwargs = got.get("template_kwargs")
        setting["template_kwargs"] = json.loads(kwargs) if isinstance(kwargs, str) else kwargs
        setting["thinking_effect"] = got.get("thinking_effect") or "template default"
        setting["max_new_tokens"] = got.get("max_new_tokens")
        prev = out.get(judge)
        out[judge] = setting if prev is None or prev == setting else {k: "mixed" for k in setting}
    return out


def _judge_block(trials: list[dict], judged: bool) -> dict:
    """Table 1's judge rates; ``counts`` holds each rate's numerator ``k``, denominator ``n`` (trials with a
    majority on that label) and ``judged`` (touched trials with a verdict), printed beside the rate."""
    touched = [t for t in trials if not t["untouched"]]
    if not judged:
        return {"flagged": None, "flagged_entity": None, "ignored": None, "derailed": None, "corrected": None,
                "aware": None, "n_judged": 0, "counts": {}}
    ent = [t for t in touched if t["entity"]]
    values = {
        "flagged": [t["flagged"] for t in touched],
        "flagged_entity": [t["flagged"] for t in ent],
        "ignored": [ignored_from(t) for t in touched if any(t[lab] is not None for lab in LABELS)],
        "derailed": [t["derailed"] for t in touched],
        "corrected": [t["corrected"] for t in touched],
        "aware": [t["aware"] for t in touched],
    }
    with_verdict = {"flagged_entity": sum(t.get("_judged", False) for t in ent)}
    n_rows = sum(t.get("_judged", False) for t in touched)
    return {
        **{k: _rate(v) for k, v in values.items()},
        "n_judged": sum(1 for t in touched if any(t[lab] is not None for lab in LABELS)),
        "counts": {k: {**_count(v), "judged": with_verdict.get(k, n_rows)} for k, v in values.items()},
    }


def _split_block(trials: list[dict], judged: bool, seed: int) -> dict:
    """Table 2: entity phrase vs neutral words, for the judge labels and the internal signal."""
    out: dict = {"counts": {}}
    for name, group in (("entity", [t for t in trials if t["entity"]]), ("words", [t for t in trials if not t["entity"]])):
        touched = [t for t in group if not t["untouched"]]
        for lab in ("flagged", "derailed"):
            if not judged:
                out[f"{lab}_{name}"] = None
                continue
            values = [t[lab] for t in touched]
            out[f"{lab}_{name}"] = _rate(values)
            if judged:
                out["counts"][f"{lab}_{name}"] = {**_count(values), "judged": sum(t.get("_judged", False) for t in touched)}
        est = model_estimate(((t["question_id"], t["_sig"]["delta_surprisal"]) for t in touched), "reference", seed=seed)
        out[f"delta_surprisal_{name}"] = est.as_dict()
    for lab in ("flagged", "derailed"):
        a, b = out[f"{lab}_entity"], out[f"{lab}_words"]
        out[f"{lab}_gap"] = None if a is None or b is None else a - b
    return out


def paper_counts(trials: list[dict], judged: bool) -> dict:
    """The counts the paper's table script divides (``scripts/update_paper_tables.py`` of the reference).

    A trial is judged when any label has a value; a label without one counts as not assigned; ignored is
    "no label assigned"; Deltas are summed over trials that have one.
    """
    c: dict[str, float] = {k: 0 for k in ("n", "unt", "jn", "flag", "corr", "der", "aware", "ign", "en", "e_flag", "e_der",
                        "sn", "s_flag", "s_der", "dsn", "den")}
    c["ds"], c["de"] = 0.0, 0.0
    for t in trials:
        c["n"] += 1
        if t["untouched"]:
            c["unt"] += 1
        sig = t["_sig"]
        if sig["delta_surprisal"] is not None:
            c["ds"] += sig["delta_surprisal"]
            c["dsn"] += 1
        if sig["delta_entropy_top20"] is not None:
            c["de"] += sig["delta_entropy_top20"]
            c["den"] += 1
        if not judged or t["untouched"] or all(t.get(lab) is None for lab in LABELS):
            continue
        fl, co, de, aw = (bool(t.get(lab)) for lab in LABELS)
        c["jn"] += 1
        c["flag"] += fl
        c["corr"] += co
        c["der"] += de
        c["aware"] += aw
        c["ign"] += not (fl or co or de or aw)
        side = "e" if t["entity"] else "s"
        c[f"{side}n"] += 1
        c[f"{side}_flag"] += fl
        c[f"{side}_der"] += de
    return c


def _with_signals(clean: dict[str, dict], trials: list[dict], window: int) -> None:
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


def summarize(store, *, window: int = 8, seed: int = 0) -> list[dict]:
    """One summary dict per model (provenance) in the run."""
    clean, trials, judged = load_rows(store)
    _with_signals(clean, trials, window)
    by_model: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for t in trials:
        by_model[(t["model"], t["provenance_id"])].append(t)
    out = []
    for (model, pid), group in sorted(by_model.items()):
        touched = [t for t in group if not t["untouched"]]
        deltas: dict[str, dict] = {}
        for s in SIGNALS:
            deltas[f"delta_{s}"] = model_estimate(
                ((t["question_id"], t["_sig"][f"delta_{s}"]) for t in touched), "reference", seed=seed).as_dict()
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
            "delta_rule": {"default": "reference", **RULE_TEXT},
            "judge": _judge_block(group, judged),
            "split": _split_block(group, judged, seed),
            "paper_counts": paper_counts(group, judged),
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
