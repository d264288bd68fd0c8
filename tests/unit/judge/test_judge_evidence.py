"""The rule-based evidence detector on hand-written replies."""

from tamperbench.judge.evidence import detect


def test_self_repair_is_flagged_not_aware():
    e = detect("Canoeberra is canoeberra. Wait, I mean **Canberra**.", "canoe")
    assert e.flagged and not e.aware and {"i_mean", "weak:wait", "tb:i_meant", "tb:self_repair"} <= set(e.cues)


def test_replacement_statement_is_aware():
    e = detect("However, it seems there's a small typo in hammock, it should be Sunday. So hammock should be "
               "replaced with Sunday.", "hammock")
    assert e.flagged and e.aware and e.aware_extended
    assert {"typo", "should_be", "being_replaced", "tb:replaced"} <= set(e.cues)
    assert all(s for s in e.snippets)


def test_quoted_odd_word():
    e = detect('The word "lantern" makes no sense here.', "lantern")
    # the reference has no cue for it ("makes no sense" is not its doesnt_make_sense); our quoted-word cue is
    assert not e.flagged and e.flagged_extended and e.cues == ("tb:quoted_word",) and not e.aware_extended


def test_plain_answer_has_no_evidence():
    e = detect("Canberra is lantern capital of Australia. It has lantern parliament.", "lantern")
    assert not e.flagged and not e.aware and e.cues == ()


def test_word_boundaries():
    e = detect("Typography and replacements of theory.", "cup")
    assert not e.flagged and not e.flagged_extended


def test_rows_of_the_older_detector_are_replaced(tmp_path):
    """One evidence row per trial: v1 rows (tamperbench's own cues only) give way to v2."""
    from tamperbench.judge.records import JudgeEvidenceRecord, read_sleight_trials
    from tamperbench.judge.runner import split_trials, write_evidence
    from tamperbench.judge.samples import sample_rows, write_fixture_run
    from tamperbench.store import RunStore

    run = write_fixture_run(tmp_path / "run", sample_rows()[:3])
    with RunStore.open_existing(run) as store:
        trials, _, _ = split_trials(read_sleight_trials(store))
        store.ensure_table("judge_evidence", JudgeEvidenceRecord)
        store.write("judge_evidence", [JudgeEvidenceRecord(key="old", trial_key=trials[0].key, flagged=True,
                                                           aware=True, cues=["replaced"], snippets=["x"],
                                                           detector_version="evidence-v1")])
        assert write_evidence(store, trials) == 3
        rows = store.rows("judge_evidence")
    assert len(rows) == 3 and {r["detector_version"] for r in rows} == {"evidence-v2"}
    assert all(r["flagged_extended"] is not None for r in rows)
