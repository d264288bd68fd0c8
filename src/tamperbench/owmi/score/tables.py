"""The tables of an OWMI run: a descriptive per-condition summary (the estimators live in owmi/score/score.py).

Why here: after a run the user must see at once that the pairs are complete (intervention,
sham, random, observer on the same items), the report-parse rate per cell and condition
(Appendix D.3: numerator and denominator), the raw yes-rate (descriptive only: detection is the
paired contrast), the impact match achieved, and the Track C sham false-alarm rate.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from tamperbench.errors import UserError
from tamperbench.owmi.score.fmt import READOUT_TAGS, READOUTS
from tamperbench.owmi.protocol.records import RUNS_TABLE, analysable
from tamperbench.store import RunStore

SQL = f"""
WITH iv AS (SELECT pair_id FROM "{RUNS_TABLE}" WHERE condition = 'intervention')
SELECT track, hook_scope, condition, coalesce(observer_tier, 0) AS tier, count(*) AS runs,
       count(*) FILTER (WHERE pair_id IN (SELECT pair_id FROM iv)) AS paired,
       count(*) FILTER (WHERE parse_ok) AS parsed,
       avg(CASE WHEN detected THEN 1.0 WHEN NOT detected THEN 0.0 END) AS yes_rate,
       avg(CASE WHEN rubric_flag THEN 1.0 WHEN NOT rubric_flag THEN 0.0 END) AS rubric_rate,
       avg(js_mean) AS js, avg(causal_effect) AS causal
FROM "{RUNS_TABLE}" GROUP BY ALL ORDER BY track, hook_scope, condition, tier
"""


def _frame(cal: dict) -> str:
    """Which context a calibration matched in. Why say so: Track C runs without the introspection system
    prompt, so a run holds one calibration per frame at the same site and dose, and two lines that
    read the same would look like a duplicate; the system message is what tells them apart."""
    return "no system message (Track C frame)" if cal.get("system_prompt") is None else "introspection system prompt"


def finish(spec, store: RunStore, result) -> None:
    """The run driver's ``finish`` step of ``owmi run`` (after the last unit): the tier-3 observer
    classifier's rows (``observer_classifier.classifier_rows``), fitted on the stored records and
    written beside them, so the summary below counts them. Here, with the summary, because both are
    scoring over stored records: the run's one call into ``score`` at its end."""
    if spec.observer_classifier:
        from tamperbench.owmi.score.observer_classifier import classifier_rows

        result.written[RUNS_TABLE] += store.write(RUNS_TABLE, classifier_rows(store.rows(RUNS_TABLE)))


def render(run_dir: str | Path, console: Console) -> list[tuple]:
    """Print the run's per-condition summary and the lines below it (read-out, impact matching); returns its rows."""
    from tamperbench.owmi.score.score import analysis_view  # the estimators' module loads scipy: only here

    with RunStore.open_existing(run_dir, read_only=True) as store:
        if store.spec_dict.get("suite") != "owmi" or not store.has_table(RUNS_TABLE):
            raise UserError(f"{run_dir}: not an OWMI run (no {RUNS_TABLE} table)")
        rows = store.con.execute(SQL).fetchall()
        all_rows = [analysis_view(r) for r in store.rows(RUNS_TABLE)]  # an older run's rows read as generated
        bad = sum(not analysable(r) for r in all_rows)
        cal = store.rows("owmi_calibration") if store.has_table("owmi_calibration") else []
        readout = str(store.spec_dict.get("readout") or "generated")
    by_construction = " (scorable)" if readout == "choice" else ""
    t = Table(title=f"OWMI {run_dir}: runs per track x scope x condition (observer tier in brackets); "
              f"{READOUT_TAGS.get(readout, readout)}")
    for col in ("track", "scope", "condition", "runs", "paired w/ intervention", "parsed", "yes-rate (descr.)",
                "C rubric flag", "mean JS", "causal effect"):
        t.add_column(col)
    f = lambda x, d=3: "-" if x is None else f"{x:.{d}f}"  # noqa: E731
    for track, scope, cond, tier, runs, paired, parsed, yes, rub, js, ce in rows:
        name = f"{cond} [{tier}]" if cond == "observer" else cond
        t.add_row(track, scope, name, str(runs), str(paired), f"{parsed}/{runs}{by_construction}", f(yes, 2), f(rub, 2),
                  f(js, 4), f(ce, 3))
    console.print(t)
    console.print(f"read-out {readout}: {READOUTS.get(readout, 'unknown read-out')}", markup=False)
    for c in cal:
        console.print(f"impact matching {c['site']} {c['operator']}={c['dose']} ({_frame(c)}; {c.get('path')} "
                      f"E[D(eta)]): target mean JS {c['target_js']:.5f}, achieved {c['achieved_js']:.5f} at norm "
                      f"{c['eta']:.3f} ({c['iterations']} evaluations)", markup=False)
    _reconstruction(run_dir, [r for r in all_rows if analysable(r)], console)
    if bad:
        console.print(f"[yellow]{bad} runs lack a field Appendix D requires and do not enter analysis[/yellow]")
    return rows


def _reconstruction(run_dir, rows: list[dict], console: Console) -> None:
    """Reconstruction rows, rule-scored (``owmi.analysis.recon_rule``; the paper scored none): per track,
    scope and condition, how many reports named the concept injected in their pair's intervention run.
    Descriptive like the yes-rate; the margins are ``owmi score``'s. Printed only when the run has them."""
    from tamperbench.owmi.score.reconstruction import scored_view

    rec = [r for r in rows if r["probe_family"] == "reconstruction"]
    if not rec:
        return
    view, dropped = scored_view(rec)
    tally: dict[tuple, list[int]] = {}
    for r in rec:
        key = (r["track"], r["hook_scope"], r["condition"], r.get("observer_tier") or 0)
        tally.setdefault(key, [0, 0, 0])[0] += 1
    for r in view:
        if r["parse_ok"] and r["detected"] is not None:
            count = tally[(r["track"], r["hook_scope"], r["condition"], r.get("observer_tier") or 0)]
            count[1] += 1
            count[2] += bool(r["detected"])
    t = Table(title=f"OWMI {run_dir}: reconstruction, rule-scored (report names its pair's injected concept; not "
              "human-validated; the paper scored none)")
    for c in ("track", "scope", "condition", "runs", "scored", "correct", "rate (descr.)"):
        t.add_column(c)
    for (track, scope, cond, tier), (n, k, hit) in sorted(tally.items(), key=lambda kv: tuple(map(str, kv[0]))):
        t.add_row(track, scope, f"{cond} [{tier}]" if cond == "observer" else cond, str(n), str(k), str(hit),
                  f"{hit / k:.2f}" if k else "-")
    console.print(t)
    if dropped:
        console.print("unscorable reconstruction pairs: " + ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())),
                      markup=False)
