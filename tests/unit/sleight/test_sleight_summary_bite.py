"""``judge_setup`` over a real RunStore: verdicts of two judge configs under both unparsed-vote rules,
with and without the votes and parse-rate tables, and a judge with no votes (no rate, not a division by
zero). Every expected value is read off the records written here."""

from test_sleight_summary_store import CLEAN, TRIALS, verdict, vote

from tamperbench.judge.records import ParseRateRecord
from tamperbench.sleight.presets import build_spec
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE
from tamperbench.sleight.summary import judge_setup
from tamperbench.store import RunStore


def _verdict(key, config, rule):
    return verdict(key, True, None, None, None, False).model_copy(update={"config_id": config, "unparsed_rule": rule})


def _rate(key, judge, config, n, parsed, retry, partial, unparsed):
    return ParseRateRecord(key=key, judge=judge, config_id=config, n_votes=n, n_parsed=parsed,
                           n_parsed_on_retry=retry, n_partial=partial, n_unparsed=unparsed,
                           unparsed_rate=unparsed / n if n else 0.0)


def test_judge_setup_over_two_configs_and_both_rules(tmp_path):
    with RunStore.open(tmp_path / "run", build_spec(model="embedded", preset="quick", max_new_tokens=8)) as st:
        st.write(CLEAN_TABLE, CLEAN)
        st.write(TRIALS_TABLE, TRIALS)
        st.write("judge_verdicts", [_verdict("t1", "c1", "false"), _verdict("t2", "c2", "abstain")])
        # no votes and no parse-rate tables yet: no fence, no rates (and no query on a missing table)
        s = judge_setup(st)
        assert s["fence"] == [] and s["parse_rates"] == {}
        assert s["unparsed_rule"] == ["abstain", "false"]
        assert [t.split(":")[0] for t in s["unparsed_rule_text"]] == ["unparsed votes abstain; a label needs a "
                                                                      "strict majority of the whole jury (else no "
                                                                      "majority)", "paper rule"]
        st.write("judge_votes", [vote("t1").model_copy(update={"key": "v1", "config_id": "c1", "fence": "paper"}),
                                 vote("t2").model_copy(update={"key": "v2", "config_id": "c2", "fence": "nonce"}),
                                 vote("t4").model_copy(update={"key": "v3", "config_id": "old", "fence": "xml"})])
        st.write("judge_parse_rates", [_rate("r1", "a", "c1", 4, 1, 2, 1, 0), _rate("r2", "b", "c2", 0, 0, 0, 0, 0),
                                       _rate("r3", "z", "old", 2, 2, 0, 0, 0)])
        s = judge_setup(st)
    assert s["fence"] == ["nonce", "paper"]  # the "old" config's votes are not this jury's
    assert s["parse_rates"] == {
        "a": {"n_votes": 4, "parsed": 3, "partial": 1, "unparsed": 0, "parse_rate": 75.0},
        "b": {"n_votes": 0, "parsed": 0, "partial": 0, "unparsed": 0, "parse_rate": None},
    }
