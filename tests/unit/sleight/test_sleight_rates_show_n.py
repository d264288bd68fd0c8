"""Every judged percentage of the default layout shows its denominators (issue 27, item 4).

The issue's example: Table 1 printed "Corr. 100" when 5 of 12 votes parsed and 7 did not. Here 12
touched trials are judged; 5 verdicts say corrected and 7 have no majority on any label (every vote
unparsed). The default layout must print ``100 (n=5/12)``; ``--layout paper`` keeps the paper's bare
cell (``update_paper_tables.py`` of fractalego/Sleight-of-Word: ``pct(s['corr'], jn)`` over trials with
a label) with the counts in ``tables.json``. Red before the change: the default cell was ``100``.
"""

from __future__ import annotations

import io
import json

from rich.console import Console

from tamperbench.judge.records import JudgeVerdictRecord
from tamperbench.sleight.spec import build_spec
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE, SleightClean, SleightTrial
from tamperbench.sleight.tables import render
from tamperbench.store import RunStore


def _clean() -> SleightClean:
    return SleightClean(key="c", provenance_id="p", model="m", question_id="q", question="q", prompt_text="",
                        prompt_ids=[], max_new_tokens=8, token_ids=[0, 1, 2], text="x", surprisal=[1.0] * 3,
                        entropy_full=[1.0] * 3, entropy_top20=[1.0] * 3, whole_word_occurrences=1,
                        finish_reason="eos", thinking=False, decode_seconds=0.0)


def _trial(i: int) -> SleightTrial:
    return SleightTrial(key=f"t{i}", provenance_id="p", model="m", question_id="q", question="q", prompt_text="",
                        trigger="the", substitution="Mandela effect" if i < 4 else f"w{i}", entity=i < 4,
                        clean_key="c", reaction_text="r", fork_at=0, n_tokens=3, token_ids=[0, 1, 2],
                        surprisal=[9.0, 2.0, 2.0], entropy_full=[1.0] * 3, entropy_top20=[1.0] * 3, injected=[0],
                        swap_positions=[0], swap_injected=[1], matched_surprisal=[[1.0]], matched_entropy_full=[[1.0]],
                        matched_entropy_top20=[[1.0]], swap_count=1, mentions=0, spaceless=0, occurrences=1,
                        coverage=1.0, untouched=False, thinking=False, finish_reason="eos", decode_seconds=0.0)


def _verdict(i: int) -> JudgeVerdictRecord:
    parsed = i % 12 in (0, 3, 5, 8, 10)  # 5 of 12 with votes that parsed, 2 of them entity trials
    labels = dict(flagged=False, corrected=True, derailed=False, aware=False) if parsed else \
        dict(flagged=None, corrected=None, derailed=None, aware=None)
    return JudgeVerdictRecord(key=f"t{i}", trial_key=f"t{i}", **labels, ignored=False if parsed else None, n_judges=3,
                              jury=["a", "b", "c"], config_id="cfg", tally={}, unparsed_rule="abstain")


def test_corr_100_shows_5_of_12(tmp_path):
    with RunStore.open(tmp_path / "run", build_spec(model="embedded", preset="quick", max_new_tokens=8)) as st:
        st.write(CLEAN_TABLE, [_clean()])
        st.write(TRIALS_TABLE, [_trial(i) for i in range(12)])
        st.write("judge_verdicts", [_verdict(i) for i in range(12)])
        buf = io.StringIO()
        out = render(st, Console(file=buf, width=300))
        paper = render(st, Console(file=io.StringIO(), width=300), layout="paper")
    head, row = out["tables"]["table1"]["columns"], out["tables"]["table1"]["rows"][0]
    cell = dict(zip(head, row))
    assert cell["Corr."] == "100 (n=5/12)" and cell["Flag."] == "0 (n=5/12)"
    assert cell["Flag. (M.E.)"] == "0 (n=2/4)" and cell["Ign."] == "0 (n=5/12)" and cell["Switch aware"] == "0.0 (n=5/12)"
    assert "100 (n=5/12)" in buf.getvalue() and "n=a/b: a trials with a majority on the label, of b judged" in buf.getvalue()
    t2 = dict(zip(out["tables"]["table2"]["columns"], out["tables"]["table2"]["rows"][0]))
    assert t2["Flagged Ent. (%)"] == "0 (n=2/4)" and t2["Flagged Subst. (%)"] == "0 (n=3/8)"
    # the paper layout keeps the paper's bare cells; the counts behind them are in tables.json
    prow = dict(zip(paper["paper_tables"]["table1"]["columns"], paper["paper_tables"]["table1"]["rows"][0]))
    assert prow["Corr."] == "100" and prow["Flag."] == "0"
    saved = json.loads((tmp_path / "run" / "tables.json").read_text())
    counts = saved["paper_tables"]["table1"]["counts"][0]
    assert counts["corr"] == [5, 5] and counts["flag_me"] == [0, 2] and counts["model"] == "m"
    assert saved["paper_tables"]["table2"]["counts"][-1]["flagged_words"] == [0, 3]
    assert saved["paper_tables"]["table3"]["counts"][0]["untouched"] == [0, 12]


def test_a_table_made_only_of_unparsed_votes_says_so():
    """The embedded judge under --preset paper parsed 0 of 12 votes (every label imputed false by the
    reference rule): the paper layout then prints Ign. 100, so the notes must say where it came from."""
    from tamperbench.sleight.tables import notes

    judge = {"fence": ["paper"], "unparsed_rule": ["false"], "unparsed_rule_text": ["paper rule"],
             "parse_rates": {"embedded": {"n_votes": 12, "parsed": 0, "partial": 0, "unparsed": 12,
                                          "parse_rate": 0.0}}}
    lines = notes(judge)
    assert lines[-1] == ("WARNING: not one vote parsed; every judge label above comes from unparsed votes "
                         "(counted as false by the paper rule).")
    judge["parse_rates"]["embedded"].update(parsed=1, unparsed=11)
    assert not any(line.startswith("WARNING") for line in notes(judge))


def test_partial_votes_are_named_as_partial_not_unparsed():
    """Issue 34, item 2: under the reference parse a vote missing a key is partial (the missing label read
    as False, the others real). 12 partial votes printed "0.0% parsed (0 unparsed)" and blamed unparsed
    votes. Red before the fix: the WARNING said "every judge label above comes from unparsed votes"."""
    from tamperbench.sleight.tables import notes

    judge = {"fence": ["paper"], "unparsed_rule": ["false"], "unparsed_rule_text": ["paper rule"],
             "parse_rule": ["reference"],
             "parse_rates": {"embedded": {"n_votes": 12, "parsed": 0, "partial": 12, "unparsed": 0,
                                          "parse_rate": 0.0, "partial_rate": 100.0, "unparsed_rate": 0.0}}}
    lines = notes(judge)
    rates = next(line for line in lines if line.startswith("Parse rates: "))
    assert "embedded: 0.0% of 12 votes parsed in full (12 partial, 0 unparsed)" in rates
    assert "the reference parse reads it as false, the other labels are real" in rates
    assert lines[-1] == ("WARNING: not one vote parsed in full; every judge label above comes from 12 partial vote(s) "
                         "(each lacks a label: the reference parse reads it as false, the other labels are real) "
                         "and 0 unparsed vote(s).")
    assert "comes from unparsed votes" not in lines[-1]
    judge["parse_rates"]["embedded"].update(partial=5, unparsed=7)
    assert lines != notes(judge) and notes(judge)[-1].endswith("and 7 unparsed vote(s) (counted as false by the paper rule).")
