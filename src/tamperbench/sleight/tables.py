"""The paper's Tables 1-3 for a run: printed with rich, saved as ``tables.md`` and ``tables.json``.

Table 1's judge columns stay empty until a ``judge_verdicts`` table exists in the run (the judge
suite writes it); the internal-signal columns are always filled. Intervals are 95% bootstrap
intervals over questions.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tamperbench.sleight.summary import fmt_estimate, summarize


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:.0f}"


def _pts(v: float | None) -> str:
    return "" if v is None else f"{v:+.0f}"


def table1(summ: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The paper's Table 1: judge labels and the post-swap rise (top-20 entropy, as in the paper)."""
    head = ["Model", "Flag.", "Flag. (M.E.)", "Ign.", "Derail.", "Corr.", "Switch aware",
            "Δ surp. (nats)", "Δ ent. (nats)"]
    rows = []
    for m in summ:
        j = m["judge"]
        rows.append([
            m["model"], _pct(j["flagged"]), _pct(j["flagged_entity"]), _pct(j["ignored"]),
            _pct(j["derailed"]), _pct(j["corrected"]), "" if j["aware"] is None else f"{j['aware']:.1f}",
            fmt_estimate(m["delta_surprisal"]), fmt_estimate(m["delta_entropy_top20"]),
        ])
    return head, rows


def table1b(summ: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Table 1 extended: full-vocabulary entropy, the matched-branch paired Deltas and coverage."""
    head = ["Model", "Trials", "Swaps", "Δ ent. full", "Paired Δ surp.", "Paired Δ ent. top-20",
            "Paired Δ ent. full", "Coverage"]
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
        rows.append([
            m["model"], _pct(s["flagged_entity"]), _pct(s["flagged_words"]), _pts(s["flagged_gap"]),
            _pct(s["derailed_entity"]), _pct(s["derailed_words"]), _pts(s["derailed_gap"]),
            fmt_estimate(s["delta_surprisal_entity"]), fmt_estimate(s["delta_surprisal_words"]),
        ])
    return head, rows


def table3(summ: list[dict]) -> tuple[list[str], list[list[str]]]:
    head = ["Model", "Untouched (%)", "Trials", "Swaps", "Thinking trace (%)"]
    rows = [[m["model"], "" if m["untouched_pct"] is None else f"{m['untouched_pct']:.1f}", str(m["trials"]),
             str(m["swaps"]), "" if m["thinking_pct"] is None else f"{m['thinking_pct']:.1f}"] for m in summ]
    return head, rows


TITLES = {
    "table1": "Table 1: judge labels (%; empty until judged) and post-swap rise in surprisal / entropy "
              "(mean over questions, 95% bootstrap CI over questions)",
    "table1b": "Table 1b: full-vocabulary entropy, matched-branch paired Deltas (per swap: post-swap window "
               "minus the unaltered branch's next tokens) and replacement coverage",
    "table2": "Table 2: entity phrase (Mandela effect) vs the neutral substituted words",
    "table3": "Table 3: untouched trials (the trigger never appeared, no swap)",
}


def _markdown(title: str, head: list[str], rows: list[list[str]]) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def render(store, console: Console | None = None) -> dict:
    """Compute, print and save the three tables; returns the JSON that was saved."""
    console = console or Console()
    if not console.is_terminal and console.width < 160:
        console.width = 160  # piped / captured output: do not fold the interval columns into 80 columns
    spec = store.spec_dict
    summ = summarize(store, window=spec.get("window", 8), seed=spec.get("seed", 0))
    built = {"table1": table1(summ), "table1b": table1b(summ), "table2": table2(summ), "table3": table3(summ)}
    md = [f"# Sleight of Word: {Path(store.run_dir).name}", "",
          f"Triggers: {', '.join(spec.get('triggers', []))}; budget {spec.get('max_new_tokens')} tokens; "
          f"{len(spec.get('questions', []))} questions x {len(spec.get('substitutions', []))} substitutions.", ""]
    for name, (head, rows) in built.items():
        t = Table(title=TITLES[name], title_justify="left")
        for i, h in enumerate(head):
            t.add_column(h, overflow="fold", no_wrap=i == 0)
        for r in rows:
            t.add_row(*r)
        console.print(t)
        md.append(_markdown(TITLES[name], head, rows))
    if not summ:
        console.print("[yellow]no trials stored in this run yet[/yellow]")
    out = {"spec": {k: spec.get(k) for k in ("model", "preset", "triggers", "max_new_tokens", "window", "topk")},
           "models": summ,
           "tables": {k: {"columns": h, "rows": r} for k, (h, r) in built.items()}}
    run_dir = Path(store.run_dir)
    (run_dir / "tables.md").write_text("\n".join(md))
    (run_dir / "tables.json").write_text(json.dumps(out, indent=2))
    return out
