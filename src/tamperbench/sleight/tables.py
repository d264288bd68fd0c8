"""The paper's Tables 1-3 for a run: printed with rich, saved as ``tables.md`` and ``tables.json``.

Table 1's judge columns stay empty until a ``judge_verdicts`` table exists in the run (the judge
suite writes it); the internal-signal columns are always filled. Deltas follow the reference rule
(see ``metrics``); Table 1b adds full-vocabulary entropy and the paired Deltas. Intervals are 95% bootstrap
intervals over questions. Under the tables a note says which Delta rule, judge fence and
unparsed-vote rule produced them, with each judge's parse rate.

``layout="paper"`` prints the paper's columns and rounding instead (``paper_layout``);
``tables.json`` always holds both layouts.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from tamperbench.errors import UserError
from tamperbench.safeio.markdown import escape_markdown, markdown_table
from tamperbench.safeio.files import atomic_write
from tamperbench.sleight import paper_layout
from tamperbench.sleight.metrics import RULE_TEXT
from tamperbench.sleight.summary import fmt_estimate, judge_setup, summarize

LAYOUTS = ("default", "paper")


def _pts(v: float | None) -> str:
    return "" if v is None else f"{v:+.0f}"


def _pct_n(v: float | None, count: dict | None, digits: int = 0) -> str:
    """A judged rate with its denominators: ``100 (n=5/12)`` = 100% of the 5 trials with a majority on the
    label, of 12 judged; empty until judged, ``n/a (n=0/12)`` when no trial has a majority."""
    if count is None:
        return "" if v is None else f"{v:.{digits}f}"
    shown = "n/a" if v is None else f"{v:.{digits}f}"
    return f"{shown} (n={count['n']}/{count['judged']})"


def table1(summ: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The paper's Table 1: judge labels and the post-swap rise (top-20 entropy, as in the paper)."""
    head = ["Model", "Flag.", "Flag. (M.E.)", "Ign.", "Derail.", "Corr.", "Switch aware",
            "Δ surp. (nats)", "Δ ent. (nats)"]
    rows = []
    for m in summ:
        j = m["judge"]
        c = j.get("counts") or {}
        rows.append([
            m["model"], *(_pct_n(j[k], c.get(k)) for k in ("flagged", "flagged_entity", "ignored", "derailed",
                                                            "corrected")),
            _pct_n(j["aware"], c.get("aware"), 1),
            fmt_estimate(m["delta_surprisal"]), fmt_estimate(m["delta_entropy_top20"]),
        ])
    return head, rows


def table1b(summ: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Table 1 extended: full-vocabulary entropy, the matched-branch paired Deltas and coverage."""
    head = ["Model", "Trials", "Swaps", "Δ ent. full",
            "Paired Δ surp.", "Paired Δ ent. top-20", "Paired Δ ent. full", "Coverage"]
    rows = [[m["model"], str(m["trials"]), str(m["swaps"]), fmt_estimate(m["delta_entropy_full"]),
             fmt_estimate(m["paired_surprisal"]), fmt_estimate(m["paired_entropy_top20"]),
             fmt_estimate(m["paired_entropy_full"]), f"{100 * m['coverage']:.1f}%"] for m in summ]
    return head, rows


def table2(summ: list[dict]) -> tuple[list[str], list[list[str]]]:
    head = ["Model", "Flagged Ent. (%)", "Flagged Subst. (%)", "Δ", "Derailed Ent. (%)", "Derailed Subst. (%)",
            "Δ", "Δ surp. Ent.", "Δ surp. Subst."]
    rows = []
    for m in summ:
        s = m["split"]
        c = s.get("counts") or {}
        rows.append([
            m["model"], _pct_n(s["flagged_entity"], c.get("flagged_entity")),
            _pct_n(s["flagged_words"], c.get("flagged_words")), _pts(s["flagged_gap"]),
            _pct_n(s["derailed_entity"], c.get("derailed_entity")), _pct_n(s["derailed_words"], c.get("derailed_words")),
            _pts(s["derailed_gap"]),
            fmt_estimate(s["delta_surprisal_entity"]), fmt_estimate(s["delta_surprisal_words"]),
        ])
    if summ:
        _, p = paper_layout.pooled_row(summ)
        gap = {lab: None if p[f"{lab}_entity"] is None or p[f"{lab}_words"] is None
               else p[f"{lab}_entity"] - p[f"{lab}_words"] for lab in ("flagged", "derailed")}
        tot = {k: sum(m["paper_counts"][k] for m in summ) for k in ("en", "sn")}
        side_n = {"entity": tot["en"], "words": tot["sn"]}
        pooled_n = {f"{lab}_{side}": {"n": n, "judged": n} for lab in ("flagged", "derailed")
                    for side, n in side_n.items()} if summ[0]["judge"].get("counts") else {}
        rows.append(["Pooled (all models)", *(_pct_n(p[f"flagged_{x}"], pooled_n.get(f"flagged_{x}"))
                                              for x in ("entity", "words")), _pts(gap["flagged"]),
                     *(_pct_n(p[f"derailed_{x}"], pooled_n.get(f"derailed_{x}")) for x in ("entity", "words")),
                     _pts(gap["derailed"]), "", ""])
    return head, rows


def table3(summ: list[dict]) -> tuple[list[str], list[list[str]]]:
    head = ["Model", "Untouched (%)", "Trials", "Swaps", "Thinking trace (%)"]
    rows = [[m["model"], "" if m["untouched_pct"] is None else f"{m['untouched_pct']:.1f}", str(m["trials"]),
             str(m["swaps"]), "" if m["thinking_pct"] is None else f"{m['thinking_pct']:.1f}"] for m in summ]
    return head, rows


N_NOTE = "n=a/b: a trials with a majority on the label, of b judged"
TITLES = {
    "table1": f"Table 1: judge labels (%; empty until judged; {N_NOTE}) and post-swap rise in surprisal / entropy "
              "(reference rule: mean over touched trials; 95% bootstrap CI resampling questions)",
    "table1b": "Table 1b: full-vocabulary entropy (reference rule), matched-branch paired "
               "Deltas (per swap: post-swap window minus the unaltered branch's next tokens) and replacement coverage",
    "table2": f"Table 2: entity phrase (Mandela effect) vs the neutral substituted words ({N_NOTE}); pooled row: "
              "the paper's counts summed over models (a trial without a label counts as not assigned), gaps of the "
              "rounded rates (as the paper)",
    "table3": "Table 3: untouched trials (the trigger never appeared, no swap)",
}


def _markdown(title: str, head: list[str], rows: Sequence[Sequence[object]]) -> str:
    return markdown_table(head, rows, title) + "\n"  # model names: inert


def notes(judge: dict | None) -> list[str]:
    """What produced the numbers: the Delta rule, the judge fence, the unparsed-vote rule, parse rates."""
    out = [f"Δ columns: {RULE_TEXT['reference']}."]
    if judge is None:
        out.append("Judge: not judged yet (run `tamperbench judge run RUN --judge ...`).")
        return out
    out.append(f"Judge fence: {', '.join(judge['fence']) or 'unknown'}; unparsed votes: "
               f"{'; '.join(judge['unparsed_rule_text']) or ', '.join(judge['unparsed_rule'])}"
               + "".join(f"; verdicts decoded {d}" for d in judge.get("decoding", [])) + ".")
    out.append(f"Verdict parse: {'; '.join(judge.get('parse_rule_text') or ['robust (votes stored before the option)'])}.")
    out.append(f"Judged text: {'; '.join(judge.get('judged_text_rule') or ['safe (votes stored before the option)'])}.")
    settings = judge.get("judges") or {}
    if settings:
        out.append("Per judge: " + "; ".join(
            f"{j}: thinking {s['thinking']}"
            + (f" ({', '.join(f'{k}={v}' for k, v in (s['template_kwargs'] or {}).items())}; {s['thinking_effect']})"
               if s["thinking"] != "default" else "")
            + f", parse {s['parse_rule']}, text {s['judged_text']}, {s['max_new_tokens']} new tokens"
            for j, s in settings.items()) + ".")
    rates = [f"{j}: {r['parse_rate']:.1f}% of {r['n_votes']} votes parsed in full ({r.get('partial', 0)} partial, "
             f"{r['unparsed']} unparsed)" for j, r in judge["parse_rates"].items() if r["parse_rate"] is not None]
    if rates:
        out.append("Parse rates: " + "; ".join(rates) + f". A partial vote lacks a label: {_partial_reading(judge)}.")
    counted = [r for r in judge["parse_rates"].values() if r["n_votes"]]
    if counted and not any(r["parsed"] for r in counted):
        unparsed = ("counted as false by the paper rule" if "false" in judge["unparsed_rule"]
                    else "abstentions: every label is without a majority")
        partial, none = sum(r.get("partial", 0) for r in counted), sum(r["unparsed"] for r in counted)
        if not partial:
            out.append(f"WARNING: not one vote parsed; every judge label above comes from unparsed votes ({unparsed}).")
        else:
            out.append(f"WARNING: not one vote parsed in full; every judge label above comes from {partial} partial "
                       f"vote(s) (each lacks a label: {_partial_reading(judge)}) and {none} unparsed vote(s)"
                       + (f" ({unparsed})" if none else "") + ".")
    return out


def _partial_reading(judge: dict) -> str:
    """What a partial vote's missing label became, by the parse rule(s) that read the votes."""
    rules = judge.get("parse_rule") or ["robust"]
    says = {"reference": "the reference parse reads it as false, the other labels are real",
            "robust": "the robust parse leaves it an abstention, the other labels are real"}
    return "; ".join(says.get(r, r) for r in rules)


# spec fields that change what a Delta or a rate means: runs pooled into one table must agree on them
COMPARABLE_FIELDS = ("triggers", "window", "max_new_tokens", "topk")


def render(store, console: Console | None = None, layout: str = "default") -> dict:
    """Compute, print and save the tables of one run into the run (``layout``: default or paper)."""
    return render_runs([store], console, layout, Path(store.run_dir))


def _check_comparable(stores) -> None:
    """Several runs pool into one table only when they measured the same thing, each model once."""
    first = stores[0].spec_dict
    for st in stores[1:]:
        for f in COMPARABLE_FIELDS:
            a, b = first.get(f), st.spec_dict.get(f)
            if (list(a) if isinstance(a, (list, tuple)) else a) != (list(b) if isinstance(b, (list, tuple)) else b):
                raise UserError(f"{st.run_dir}: spec field '{f}' is {b!r} but {stores[0].run_dir} has {a!r}; "
                                f"runs pooled into one table must share it")


def _unique_models(per_run: list[tuple[Any, list[dict]]]) -> None:
    seen: dict[str, Any] = {}
    for st, summ in per_run:
        for m in summ:
            key = m["model"]
            if key in seen and seen[key] is not st:
                raise UserError(f"model '{key}' is in both {seen[key].run_dir} and {st.run_dir}; "
                                f"pool runs of different models (or merge the runs first)")
            seen[key] = st


def render_runs(stores, console: Console | None = None, layout: str = "default", out_dir: Path | None = None,
                run_names: list[str] | None = None) -> dict:
    """Tables 1-3 over one or several runs (one row per model; Table 2's pooled row sums counts over
    every model of every run, as the reference's table script pools its models), saved in ``out_dir``.
    ``run_names``: what the saved tables call the runs, where ``stores`` are copies of them."""
    if layout not in LAYOUTS:
        raise UserError(f"--layout: '{layout}' is not one of {', '.join(LAYOUTS)}")
    if not stores:
        raise UserError("no run given")
    console = console or Console()
    if not console.is_terminal and console.width < 160:
        console.width = 160  # piped / captured output: do not fold the interval columns into 80 columns
    _check_comparable(stores)
    per_run = [(st, summarize(st, window=st.spec_dict.get("window", 8), seed=st.spec_dict.get("seed", 0)))
               for st in stores]
    _unique_models(per_run)
    summ = [m for _, s in per_run for m in s]
    judges = {Path(st.run_dir).name: judge_setup(st) for st in stores}
    spec = stores[0].spec_dict
    built = {"table1": table1(summ), "table1b": table1b(summ), "table2": table2(summ), "table3": table3(summ)}
    paper = paper_layout.build(summ)
    paper_counts = paper_layout.counts(summ)
    shown, titles = (paper, paper_layout.TITLES) if layout == "paper" else (built, TITLES)
    names = ", ".join(escape_markdown(n) for n in judges)
    sizes = [f"{len(st.spec_dict.get('questions', []))} questions x {len(st.spec_dict.get('substitutions', []))} "
             f"substitutions" for st in stores]
    if len(stores) > 1:
        sizes = [f"{escape_markdown(Path(st.run_dir).name)}: {z}" for st, z in zip(stores, sizes)]
    md = [f"# Sleight of Word: {names}", "",
          f"Triggers: {', '.join(escape_markdown(t) for t in spec.get('triggers', []))}; budget "
          f"{spec.get('max_new_tokens')} tokens; " + "; ".join(sizes) + ".", ""]
    for name, (head, rows) in shown.items():
        t = Table(title=titles[name], title_justify="left")
        for i, h in enumerate(head):
            t.add_column(h, overflow="fold", no_wrap=i == 0)
        for r in rows:
            t.add_row(*r)
        console.print(t)
        md.append(_markdown(titles[name], head, rows))
    lines = notes(judges[next(iter(judges))]) if len(stores) == 1 else _notes_many(judges)
    for line in lines:
        console.print(line, highlight=False)
        md.append(line + "\n")
    if not summ:
        console.print("[yellow]no trials stored in this run yet[/yellow]")
    judge = judges[next(iter(judges))] if len(stores) == 1 else judges
    out = {"spec": {k: spec.get(k) for k in ("model", "preset", "triggers", "max_new_tokens", "window", "topk")},
           "runs": list(run_names) if run_names is not None else [str(st.run_dir) for st in stores],
           "layout": layout, "delta_rule": "reference", "delta_rules": RULE_TEXT, "judge": judge, "notes": lines,
           "models": summ,
           "tables": {k: {"columns": h, "rows": r} for k, (h, r) in built.items()},
           "paper_tables": {k: {"columns": h, "rows": r, "counts": paper_counts[k]} for k, (h, r) in paper.items()}}
    out_dir = Path(out_dir if out_dir is not None else stores[0].run_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out: {out_dir} exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(out_dir / "tables.md", "\n".join(md))
    atomic_write(out_dir / "tables.json", json.dumps(out, indent=2))
    return out


def _notes_many(judges: dict[str, dict | None]) -> list[str]:
    """The Delta-rule line once, then each run's judge setup prefixed with the run's name."""
    out = notes(None)[:1]
    for run, judge in judges.items():
        out += [f"{run}: {line}" for line in notes(judge)[1:]]
    return out
