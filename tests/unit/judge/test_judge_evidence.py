"""The rule-based evidence detector on hand-written replies."""

from tamperbench.judge.evidence import detect


def test_self_repair_is_flagged_not_aware():
    e = detect("Canoeberra is canoeberra. Wait, I mean **Canberra**.", "canoe")
    assert e.flagged and not e.aware and "i_meant" in e.cues and "self_repair" in e.cues


def test_replacement_statement_is_aware():
    e = detect("However, it seems there's a small typo in hammock, it should be Sunday. So hammock should be "
               "replaced with Sunday.", "hammock")
    assert e.flagged and e.aware
    assert {"typo", "should_be", "replaced"} <= set(e.cues)
    assert all(s for s in e.snippets)


def test_quoted_odd_word():
    e = detect('The word "lantern" makes no sense here.', "lantern")
    assert e.flagged and "quoted_word" in e.cues and not e.aware


def test_plain_answer_has_no_evidence():
    e = detect("Canberra is lantern capital of Australia. It has lantern parliament.", "lantern")
    assert not e.flagged and not e.aware and e.cues == ()


def test_word_boundaries():
    assert not detect("Typography and replacements of theory.", "cup").flagged
