"""Judge agreement on a real run store, with abstentions: expected n, kappa and accuracy by hand
and from independent libraries (sklearn's cohen_kappa_score, statsmodels' fleiss_kappa).

The defect this pins: an abstention (unparsed vote, no-majority verdict) read as False. Every
comparison must use only the trials where both sides gave a label, and report that n.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tamperbench.errors import UserError
from tamperbench.judge.agreement import compute_agreement, current_jury
from tamperbench.judge.records import (HumanLabelRecord, JudgeEvidenceRecord, JudgeVerdictRecord,
                                       JudgeVoteRecord)
from tamperbench.store import RunStore, trial_key

T, F, N = True, False, None
TRIALS = [f"t{i}" for i in range(8)]
# flagged, per trial t0..t7
VOTES = {"j1": [T, T, F, F, N, T, F, T],
         "j2": [T, F, F, N, T, T, F, T],
         "j3": [T, T, F, F, F, N, F, F]}
VERDICT = [T, T, F, N, N, T, F, N]
EVIDENCE = [T, F, F, T, F, T, T, F]
HUMAN = [T, F, F, T, T, T, F, F]
# "corrected": j1 and j2 disagree on t1 only; the verdict abstains on t7
CORR = {"j1": [T, T, F, F, T, F, T, F], "j2": [T, F, F, F, T, F, T, F], "j3": [T, T, F, F, T, F, T, N]}
CORR_VERDICT = [T, T, F, F, T, F, T, N]
CORR_HUMAN = [T, T, F, T, T, F, T, T]


class Spec(BaseModel):
    suite: str = "agreement-bite"


def vote(judge, i, flagged, corrected, config="cfg"):
    return JudgeVoteRecord(
        key=trial_key({"j": judge, "t": TRIALS[i], "c": config}), trial_key=TRIALS[i], judge=judge, config_id=config,
        status="parsed" if flagged is not None else "partial", flagged=flagged, corrected=corrected,
        derailed=False, aware=False, confidence=None, rationale=None, parse_error=None, attempts=1, raw_text="",
        retry_text=None, prompt_text="", retry_prompt_text=None, finish_reason="eos", fence="nonce",
        fence_nonce=None, defused_special_tokens=0, prompt_version="v", prompt_sha256="0", max_new_tokens=8,
        temperature=0.0, seed=0)


@pytest.fixture
def store(tmp_path):
    s = RunStore.open(tmp_path / "run", Spec())
    votes = [vote(j, i, VOTES[j][i], CORR[j][i]) for j in VOTES for i in range(8)]
    # a stale config and a judge outside the jury, both with contradicting labels: must be ignored
    votes += [vote("j1", 4, T, T, config="old"), vote("j9", 0, F, F), vote("j9", 3, F, F)]
    s.write("judge_votes", votes)
    s.write("judge_verdicts", [JudgeVerdictRecord(
        key=trial_key({"v": t}), trial_key=t, flagged=VERDICT[i], corrected=CORR_VERDICT[i], derailed=False,
        aware=False, ignored=None, n_judges=3, jury=["j1", "j2", "j3"], config_id="cfg", tally={})
        for i, t in enumerate(TRIALS)])
    s.write("judge_evidence", [JudgeEvidenceRecord(
        key=trial_key({"e": t}), trial_key=t, flagged=EVIDENCE[i], aware=False, cues=[], snippets=[],
        detector_version="1") for i, t in enumerate(TRIALS)])
    s.write("human_labels", [HumanLabelRecord(
        key=trial_key({"h": t}), trial_key=t, annotator="ann", flagged=HUMAN[i], corrected=CORR_HUMAN[i],
        derailed=False, aware=False, note="", sample_seed=0) for i, t in enumerate(TRIALS)])
    yield s
    s.close()


def pick(rows, kind, label, a, b):
    (r,) = [r for r in rows if (r.kind, r.label, r.rater_a, r.rater_b) == (kind, label, a, b)]
    return r


def both_labelled(xs, ys):
    pairs = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
    return [x for x, _ in pairs], [y for _, y in pairs]


def test_cohen_pairs_leave_abstentions_out(store):
    from sklearn.metrics import cohen_kappa_score

    rows = compute_agreement(store)
    r = pick(rows, "cohen_pair", "flagged", "j1", "j2")
    # by hand: t3 (j2 abstains) and t4 (j1 abstains) are out; 5 of the 6 others agree;
    # p_o = 5/6, p_e = (4/6)(3/6) + (2/6)(3/6) = 1/2, kappa = (5/6 - 1/2) / (1/2) = 2/3
    assert (r.n, r.accuracy) == (6, pytest.approx(5 / 6))
    assert r.kappa == pytest.approx(2 / 3)
    for a, b in [("j1", "j2"), ("j1", "j3"), ("j2", "j3")]:
        xs, ys = both_labelled(VOTES[a], VOTES[b])
        r = pick(rows, "cohen_pair", "flagged", a, b)
        assert r.n == len(xs) and r.kappa == pytest.approx(cohen_kappa_score(xs, ys))
        assert r.accuracy == pytest.approx(sum(x == y for x, y in zip(xs, ys)) / len(xs))
    r = pick(rows, "cohen_pair", "derailed", "j1", "j2")  # everyone said False: kappa undefined, accuracy 1
    assert (r.n, r.kappa, r.accuracy) == (8, None, 1.0)


def test_fleiss_uses_only_trials_every_juror_labelled(store):
    import numpy as np
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    rows = compute_agreement(store)
    r = pick(rows, "fleiss", "flagged", "jury", "jury")
    full = [i for i in range(8) if all(VOTES[j][i] is not None for j in VOTES)]
    assert full == [0, 1, 2, 6, 7] and r.n == 5 and r.accuracy is None
    table, _ = aggregate_raters(np.array([[int(VOTES[j][i]) for j in VOTES] for i in full]))
    assert r.kappa == pytest.approx(fleiss_kappa(table, method="fleiss"))
    # by hand: P_i = 1, 1/3, 1, 1, 1/3 -> P_bar = 11/15 = 165/225; p_T = 7/15 -> P_e = (49 + 64)/225;
    # kappa = (165 - 113) / (225 - 113) = 52/112
    assert r.kappa == pytest.approx(52 / 112)


def test_evidence_and_human_comparisons_leave_no_majority_out(store):
    from sklearn.metrics import cohen_kappa_score

    rows = compute_agreement(store)
    r = pick(rows, "evidence_vs_jury", "flagged", "evidence", "jury")
    assert (r.n, r.accuracy) == (5, pytest.approx(3 / 5))  # t3, t4, t7: no majority
    r = pick(rows, "judge_vs_human", "flagged", "jury", "human:ann")
    # by hand: t0 T/T, t1 T/F, t2 F/F, t5 T/T, t6 F/F -> p_o = 0.8, p_e = 0.6*0.4 + 0.4*0.6 = 0.48
    assert (r.n, r.accuracy) == (5, pytest.approx(0.8))
    assert r.kappa == pytest.approx((0.8 - 0.48) / 0.52)
    for judge in VOTES:
        xs, ys = both_labelled(VOTES[judge], HUMAN)
        r = pick(rows, "judge_vs_human", "flagged", judge, "human:ann")
        assert r.n == 7 and r.kappa == pytest.approx(cohen_kappa_score(xs, ys))
    xs, ys = both_labelled(CORR_VERDICT, CORR_HUMAN)
    r = pick(rows, "judge_vs_human", "corrected", "jury", "human:ann")
    assert r.n == 7 and r.accuracy == pytest.approx(sum(x == y for x, y in zip(xs, ys)) / 7)
    r = pick(rows, "judge_vs_human", "flagged", "evidence", "human:ann")
    assert r.n == 8 and r.accuracy == pytest.approx(6 / 8)
    assert not [x for x in rows if x.rater_a == "evidence" and x.label in ("corrected", "derailed")]


def test_rows_are_complete_stored_and_ignore_stale_configs_and_outsiders(store):
    rows = compute_agreement(store)
    labels = ("flagged", "corrected", "derailed", "aware")
    # 3 pairs + 1 fleiss per label, 2 evidence_vs_jury, (3 judges + jury) x 4 labels + evidence x 2 vs human
    assert len(rows) == 4 * 4 + 2 + 4 * 4 + 2
    assert {r.label for r in rows} == set(labels) and not [r for r in rows if "j9" in (r.rater_a, r.rater_b)]
    assert all(r.config_id == "cfg" for r in rows)
    stored = store.rows("judge_agreement")
    assert len(stored) == len(rows) and {s["key"] for s in stored} == {r.key for r in rows}
    assert current_jury(store) == (["j1", "j2", "j3"], "cfg")


def test_no_verdicts_is_a_user_error(tmp_path):
    with RunStore.open(tmp_path / "empty", Spec()) as s:
        with pytest.raises(UserError, match="no judge verdicts"):
            compute_agreement(s)


def test_row_keys_follow_the_documented_recipe(store):
    """Keys are stable across versions (a rerun replaces, never duplicates): hash of these fields."""
    rows = compute_agreement(store)
    r = pick(rows, "cohen_pair", "flagged", "j1", "j2")
    assert r.key == trial_key({"kind": "cohen_pair", "label": "flagged", "a": "j1", "b": "j2", "config": "cfg"})
    r = pick(rows, "judge_vs_human", "aware", "evidence", "human:ann")
    assert r.key == trial_key({"kind": "judge_vs_human", "label": "aware", "a": "evidence", "b": "human:ann",
                               "config": "cfg"})


def test_partial_human_labels_and_a_single_or_empty_verdict_table(tmp_path, store):
    # a second annotator who labelled only t0..t2: compared on those three trials, nothing invented
    store.write("human_labels", [HumanLabelRecord(
        key=trial_key({"h2": t}), trial_key=t, annotator="bob", flagged=True, corrected=True, derailed=False,
        aware=False, note="", sample_seed=0) for t in TRIALS[:3]])
    rows = compute_agreement(store)
    r = pick(rows, "judge_vs_human", "flagged", "jury", "human:bob")
    assert (r.n, r.accuracy) == (3, pytest.approx(2 / 3))  # verdicts T, T, F against T, T, T

    with RunStore.open(tmp_path / "one", Spec()) as one:
        one.write("judge_verdicts", [JudgeVerdictRecord(
            key="v", trial_key="t0", flagged=True, corrected=None, derailed=None, aware=None, ignored=None,
            n_judges=1, jury=["solo"], config_id="c1", tally={})])
        assert current_jury(one) == (["solo"], "c1")
    with RunStore.open(tmp_path / "empty-table", Spec()) as empty:
        empty.ensure_table("judge_verdicts", JudgeVerdictRecord)
        with pytest.raises(UserError, match="no judge verdicts yet"):
            current_jury(empty)


def test_a_jury_of_two_still_gets_fleiss_and_a_jury_of_one_none(tmp_path):
    def build(path, jury):
        s = RunStore.open(path, Spec())
        s.write("judge_votes", [vote(j, i, VOTES[j][i], CORR[j][i]) for j in jury for i in range(8)])
        s.write("judge_verdicts", [JudgeVerdictRecord(
            key=trial_key({"v": t}), trial_key=t, flagged=VERDICT[i], corrected=None, derailed=None, aware=None,
            ignored=None, n_judges=len(jury), jury=jury, config_id="cfg", tally={}) for i, t in enumerate(TRIALS)])
        return s

    with build(tmp_path / "two", ["j1", "j2"]) as s:
        rows = compute_agreement(s)
        r = pick(rows, "fleiss", "flagged", "jury", "jury")
        # two raters: Fleiss' kappa is Scott's pi on the 6 trials both labelled (by hand:
        # p_o = 5/6, p_T = 7/12 -> p_e = (49 + 25)/144 = 74/144, pi = (120 - 74)/(144 - 74) = 46/70)
        assert r.n == 6 and r.kappa == pytest.approx(46 / 70)
    with build(tmp_path / "one", ["j1"]) as s:
        rows = compute_agreement(s)
        assert not [r for r in rows if r.kind in ("fleiss", "cohen_pair")]
