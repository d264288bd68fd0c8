"""Agreement between judges, with the evidence detector, and with the human gold set.

WHY: a jury's labels are only as good as its judges agree with each other and with people. We
report, per label: pairwise Cohen's kappa between judges, Fleiss' kappa across the whole jury, the
evidence detector against the jury (flagged/aware), and each judge, the jury majority and the
evidence detector against each human annotator (accuracy and Cohen's kappa). Every comparison uses
only the trials where both sides gave a label (abstentions and no-majority verdicts are left out,
never read as False) and reports that ``n``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from tamperbench.errors import UserError
from tamperbench.judge.prompt import LABELS
from tamperbench.judge.records import AgreementRecord, replace_rows
from tamperbench.stats.agreement import cohen_kappa, fleiss_kappa_from_ratings, percent_agreement
from tamperbench.store import RunStore, trial_key

EVIDENCE_LABELS = ("flagged", "aware")


def _record(kind: str, label: str, a: str, b: str, xs: Sequence, ys: Sequence, config_id: str,
            kappa: float | None = None, fleiss: bool = False) -> AgreementRecord:
    if not fleiss:
        kappa = cohen_kappa(xs, ys)
    return AgreementRecord(key=trial_key({"kind": kind, "label": label, "a": a, "b": b, "config": config_id}),
                           kind=kind, label=label, rater_a=a, rater_b=b, n=len(xs), kappa=kappa,
                           accuracy=None if fleiss else percent_agreement(xs, ys), config_id=config_id)


def _paired(left: dict[str, bool | None], right: dict[str, bool | None]) -> tuple[list[bool], list[bool]]:
    keys = sorted(k for k in left.keys() & right.keys() if left[k] is not None and right[k] is not None)
    return [bool(left[k]) for k in keys], [bool(right[k]) for k in keys]


def current_jury(store: RunStore) -> tuple[list[str], str]:
    """The jury and judge config of the stored verdicts."""
    if not store.has_table("judge_verdicts") or store.count("judge_verdicts") == 0:
        raise UserError(f"{store.run_dir}: no judge verdicts yet; run `tamperbench judge run RUN --judge M` first")
    row = store.con.execute("SELECT jury, config_id FROM judge_verdicts ORDER BY created_at DESC, key LIMIT 1").fetchone()
    assert row is not None  # counted above
    jury, config_id = row
    return list(jury), config_id


def compute_agreement(store: RunStore) -> list[AgreementRecord]:
    """Compute every comparison, replace ``judge_agreement`` atomically and return the rows."""
    jury, cfg = current_jury(store)
    votes: dict[str, dict[str, dict[str, bool | None]]] = {j: {lab: {} for lab in LABELS} for j in jury}
    placeholders = ", ".join("?" for _ in jury)
    q = f"SELECT judge, trial_key, {', '.join(LABELS)} FROM judge_votes WHERE config_id = ? AND judge IN ({placeholders})"
    for judge, tk, *vals in store.con.execute(q, [cfg, *jury]).fetchall():
        for lab, val in zip(LABELS, vals, strict=True):
            votes[judge][lab][tk] = val
    verdict: dict[str, dict[str, bool | None]] = {lab: {} for lab in LABELS}
    for tk, *vals in store.con.execute(f"SELECT trial_key, {', '.join(LABELS)} FROM judge_verdicts").fetchall():
        for lab, val in zip(LABELS, vals, strict=True):
            verdict[lab][tk] = val
    evidence: dict[str, dict[str, bool | None]] = {lab: {} for lab in EVIDENCE_LABELS}
    if store.has_table("judge_evidence"):
        for tk, fl, aw in store.con.execute("SELECT trial_key, flagged, aware FROM judge_evidence").fetchall():
            evidence["flagged"][tk], evidence["aware"][tk] = fl, aw

    out: list[AgreementRecord] = []
    for lab in LABELS:
        for a, b in combinations(jury, 2):
            xs, ys = _paired(votes[a][lab], votes[b][lab])
            out.append(_record("cohen_pair", lab, a, b, xs, ys, cfg))
        if len(jury) >= 2:
            trials = sorted(set.intersection(*(set(k for k, v in votes[j][lab].items() if v is not None) for j in jury)))
            ratings = [[votes[j][lab][t] for j in jury] for t in trials]
            out.append(_record("fleiss", lab, "jury", "jury", ratings, ratings, cfg,
                               kappa=fleiss_kappa_from_ratings(ratings), fleiss=True))
    for lab in EVIDENCE_LABELS:
        xs, ys = _paired(evidence[lab], verdict[lab])
        out.append(_record("evidence_vs_jury", lab, "evidence", "jury", xs, ys, cfg))

    if store.has_table("human_labels"):
        annotators = [a for (a,) in store.con.execute("SELECT DISTINCT annotator FROM human_labels ORDER BY 1").fetchall()]
        for annotator in annotators:
            rows = store.con.execute(f"SELECT trial_key, {', '.join(LABELS)} FROM human_labels WHERE annotator = ?",
                                     [annotator]).fetchall()
            human = {lab: {r[0]: r[1 + i] for r in rows} for i, lab in enumerate(LABELS)}
            for lab in LABELS:
                raters = [(j, votes[j][lab]) for j in jury] + [("jury", verdict[lab])]
                if lab in EVIDENCE_LABELS:
                    raters.append(("evidence", evidence[lab]))
                for name, theirs in raters:
                    xs, ys = _paired(theirs, human[lab])
                    out.append(_record("judge_vs_human", lab, name, f"human:{annotator}", xs, ys, cfg))
    replace_rows(store, "judge_agreement", AgreementRecord, out)
    return out
