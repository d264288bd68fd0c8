"""summarize() and the tables over a real RunStore holding hand-made records (no model): every figure
below is worked out by hand in the comments."""

import io
import json

import pytest
from rich.console import Console

from tamperbench.judge.records import JudgeVerdictRecord, JudgeVoteRecord, ParseRateRecord
from tamperbench.sleight.spec import build_spec
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE, SleightClean, SleightTrial
from tamperbench.sleight.summary import judge_setup, summarize
from tamperbench.sleight.tables import render
from tamperbench.store import RunStore


def clean(key, qid, s, t20, full):
    return SleightClean(key=key, provenance_id="p", model="m", question_id=qid, question=qid, prompt_text="",
                        prompt_ids=[], max_new_tokens=8, token_ids=list(range(len(s))), text="x", surprisal=s,
                        entropy_full=full, entropy_top20=t20, whole_word_occurrences=1, finish_reason="eos",
                        thinking=False, decode_seconds=0.0)


def trial(key, qid, sub, ck, fork, n, s, t20, full, inj, swaps, matched, occ, untouched=False, thinking=False):
    m = [list(x) for x in matched]
    return SleightTrial(key=key, provenance_id="p", model="m", question_id=qid, question=qid, prompt_text="",
                        trigger="the", substitution=sub, entity=sub == "Mandela effect", clean_key=ck,
                        reaction_text="r", fork_at=fork, n_tokens=n, token_ids=list(range(len(s))), surprisal=s,
                        entropy_full=full, entropy_top20=t20, injected=inj, swap_positions=[p for p, _ in swaps],
                        swap_injected=[k for _, k in swaps], matched_surprisal=m, matched_entropy_full=m,
                        matched_entropy_top20=m, swap_count=len(swaps), mentions=0, spaceless=0, occurrences=occ,
                        coverage=len(swaps) / occ if occ else 0.0, untouched=untouched, thinking=thinking,
                        finish_reason="eos", decode_seconds=0.0)


CLEAN = [clean("c1", "q1", [1.0] * 4, [2.0] * 4, [3.0] * 4),  # means 1, 2, 3
         clean("c2", "q2", [2.0] * 2, [1.0] * 2, [1.0] * 2)]  # means 2, 1, 1
TRIALS = [
    # t1: 0 | [1 injected] 2 3 4; window [2,3,4]: surprisal (2+4+6)/3 = 4 -> 3; top-20 3 - 2 = 1; paired 4 - 1 = 3
    trial("t1", "q1", "Mandela effect", "c1", 1, 5, [9.0, 2, 4, 6], [9.0, 3, 3, 3], [9.0, 4, 4, 4], [1], [(1, 1)],
          [[1.0, 1.0]], 1),
    # t2: 0 | [1] 2 [3] 4 5, swaps at 1 and 3. Reference: [2,4,5] + [4,5] -> (2+6+1+6+1)/5 = 3.2 -> 2.2;
    # pooled: {2,4,5} -> 3 -> 2.0. Paired: [2,4,5] mean 3 - 1 = 2; [4,5] mean 3.5 - 1 = 2.5
    trial("t2", "q1", "scarf", "c1", 1, 6, [9.0, 2, 9, 6, 1], [9.0, 2, 9, 2, 2], [9.0, 3, 9, 3, 3], [1, 3],
          [(1, 1), (3, 1)], [[1.0], [1.0]], 3, thinking=True),
    trial("t3", "q2", "scarf", "c2", 2, 2, [], [], [], [], [], [], 0, untouched=True),
    # t4: [0 injected] 1 2; window [1,2]: (3+5)/2 = 4 - 2 = 2; top-20 (1+3)/2 - 1 = 1; paired 4 - 3 = 1
    trial("t4", "q2", "Mandela effect", "c2", 0, 3, [9.0, 3, 5], [9.0, 1, 3], [9.0, 2, 2], [0], [(0, 1)], [[3.0]], 1),
]


def verdict(key, f, c, d, a, ignored):
    return JudgeVerdictRecord(key=key, trial_key=key, flagged=f, corrected=c, derailed=d, aware=a, ignored=ignored,
                              n_judges=2, jury=["a", "b"], config_id="cfg", tally={}, unparsed_rule="abstain")


def vote(key):
    return JudgeVoteRecord(key=key, trial_key=key, judge="a", config_id="cfg", status="parsed", flagged=True,
                           corrected=None, derailed=None, aware=None, confidence=None, rationale=None,
                           parse_error=None, attempts=1, raw_text="", retry_text=None, prompt_text="",
                           retry_prompt_text=None, finish_reason="eos", fence="nonce", fence_nonce=None,
                           defused_special_tokens=0, prompt_version="v", prompt_sha256="s", max_new_tokens=16,
                           temperature=0.0, seed=0)


@pytest.fixture
def store(tmp_path):
    st = RunStore.open(tmp_path / "run", build_spec(model="embedded", preset="quick", max_new_tokens=8))
    st.write(CLEAN_TABLE, CLEAN)
    st.write(TRIALS_TABLE, TRIALS)
    yield st
    st.close()


def test_deltas_by_hand(store):
    (m,) = summarize(store)
    assert m["delta_surprisal"]["mean"] == pytest.approx((3 + 2.2 + 2) / 3)  # mean over touched trials
    assert "pooled_delta_surprisal" not in m  # tamperbench v1's pooled rule is gone (issue 28)
    assert m["delta_entropy_top20"]["mean"] == pytest.approx((1 + 0 + 1) / 3)
    assert m["delta_entropy_full"]["mean"] == pytest.approx((1 + 0 + 1) / 3)
    assert m["paired_surprisal"]["mean"] == pytest.approx(((3 + 2 + 2.5) / 3 + 1) / 2)
    assert m["delta_surprisal"]["n_items"] == 3 and m["delta_surprisal"]["n_questions"] == 2
    assert m["split"]["delta_surprisal_entity"]["mean"] == pytest.approx((3 + 2) / 2)
    assert m["split"]["delta_surprisal_words"]["mean"] == pytest.approx(2.2)
    assert (m["trials"], m["touched"], m["swaps"]) == (4, 3, 4)
    assert m["untouched_pct"] == 25.0 and m["thinking_pct"] == 25.0 and m["coverage"] == pytest.approx(4 / 5)
    assert m["judge"]["flagged"] is None and m["delta_rule"]["default"] == "reference"
    assert judge_setup(store) is None


def test_judge_columns_rule_fence_and_parse_rates(store):
    store.write("judge_verdicts", [verdict("t1", True, None, None, None, False),
                                   verdict("t2", False, False, False, False, True),
                                   verdict("t4", False, True, False, False, False)])
    store.write("judge_votes", [vote("t1")])
    store.write("judge_parse_rates", [ParseRateRecord(key="r", judge="a", config_id="cfg", n_votes=3, n_parsed=1,
                                                      n_parsed_on_retry=1, n_partial=0, n_unparsed=1,
                                                      unparsed_rate=1 / 3)])
    (m,) = summarize(store)
    j = m["judge"]
    assert j["flagged"] == pytest.approx(100 / 3) and j["flagged_entity"] == 50.0
    assert j["ignored"] == pytest.approx(100 / 3)  # t1 is decided (flagged), t2 ignored, t4 corrected
    assert (j["corrected"], j["derailed"], j["aware"], j["n_judged"]) == (50.0, 0.0, 0.0, 3)
    assert m["split"]["flagged_entity"] == 50.0 and m["split"]["flagged_words"] == 0.0
    assert m["split"]["flagged_gap"] == 50.0
    c = m["paper_counts"]
    assert (c["jn"], c["flag"], c["corr"], c["ign"], c["en"], c["e_flag"], c["sn"]) == (3, 1, 1, 1, 2, 1, 1)
    setup = judge_setup(store)
    assert setup["fence"] == ["nonce"] and setup["unparsed_rule"] == ["abstain"]
    assert setup["parse_rates"]["a"] == {"n_votes": 3, "parsed": 2, "partial": 0, "unparsed": 1,
                                         "parse_rate": pytest.approx(200 / 3), "partial_rate": 0.0,
                                         "unparsed_rate": pytest.approx(100 / 3)}
    buf = io.StringIO()
    out = render(store, Console(file=buf, width=250), layout="paper")
    text = buf.getvalue()
    assert "Judge fence: nonce; unparsed votes: unparsed votes abstain" in text
    assert "a: 66.7% of 3 votes parsed in full (0 partial, 1 unparsed)" in text
    assert out["layout"] == "paper" and out["delta_rule"] == "reference"
    saved = json.loads((store.run_dir / "tables.json").read_text())
    assert saved["paper_tables"]["table1"]["rows"][0] == ["m", "33", "50", "33", "0", "33", "0.0", "+2.40", "+0.67"]
    assert saved["paper_tables"]["table2"]["rows"] == [["m", "50", "0", "+50", "0", "0", "+0"],
                                                       ["Pooled (all models)", "50", "0", "+50", "0", "0", "+0"]]
    assert saved["tables"]["table1"]["rows"][0][7].startswith("+2.40 [")
    assert saved["tables"]["table1b"]["rows"][0][4].startswith("+1.75")  # paired surprisal (the pooled rule is gone)
    assert saved["tables"]["table2"]["rows"][-1][:4] == ["Pooled (all models)", "50 (n=2/2)", "0 (n=1/1)", "+50"]
    with pytest.raises(Exception, match="--layout"):
        render(store, Console(file=io.StringIO()), layout="wide")


def test_verdicts_of_an_older_layout_and_a_trial_without_its_clean_row(tmp_path):
    from tamperbench.sleight.metrics import Estimate
    from tamperbench.sleight.summary import fmt_estimate

    orphan = TRIALS[0].model_copy(update={"key": "t5", "clean_key": "gone"})  # touched, clean row missing
    with RunStore.open(tmp_path / "run", build_spec(model="embedded", preset="quick", max_new_tokens=8)) as st:
        st.write(CLEAN_TABLE, CLEAN)
        st.write(TRIALS_TABLE, TRIALS + [orphan])
        st.con.execute("CREATE TABLE judge_verdicts (trial_key VARCHAR, flagged BOOLEAN, corrected BOOLEAN, "
                       "derailed BOOLEAN, aware BOOLEAN)")  # no config_id, no unparsed_rule (before issue 9)
        st.con.execute("INSERT INTO judge_verdicts VALUES ('t1', true, NULL, NULL, NULL), "
                       "('t2', false, false, true, false), ('t4', false, true, false, false)")
        assert judge_setup(st) == {"fence": [], "unparsed_rule": ["abstain"], "decoding": [],
                                   "unparsed_rule_text": [judge_setup(st)["unparsed_rule_text"][0]], "parse_rates": {},
                                   "parse_rule": [], "parse_rule_text": [], "judged_text": [], "judged_text_rule": [],
                                   "judges": {}}
        assert judge_setup(st)["unparsed_rule_text"][0].startswith("unparsed votes abstain")
        (m,) = summarize(st)
    # the orphan adds no Delta (its clean row is gone) but counts as a trial
    assert m["trials"] == 5 and m["delta_surprisal"]["n_items"] == 3
    assert m["delta_surprisal"]["mean"] == pytest.approx((3 + 2.2 + 2) / 3)
    s = m["split"]
    # derailed: entity t1 undecided, t4 False, orphan unjudged -> 0%; words t2 True -> 100%; gap -100
    assert (s["derailed_entity"], s["derailed_words"], s["derailed_gap"]) == (0.0, 100.0, -100.0)
    assert (s["flagged_entity"], s["flagged_words"], s["flagged_gap"]) == (50.0, 0.0, 50.0)
    assert fmt_estimate(None) == ""
    assert fmt_estimate({"mean": None, "lo": None, "hi": None}) == "n/a"
    assert fmt_estimate(Estimate(1.5, None, None, 1, 1)) == "+1.50"
    assert fmt_estimate(Estimate(-0.25, -0.5, 0.125, 2, 4)) == "-0.25 [-0.50, +0.12]"
