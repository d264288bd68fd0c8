"""``judge_setup`` over a real RunStore: verdicts of two judge configs under both unparsed-vote rules,
with and without the votes and parse-rate tables, and a judge with no votes (no rate, not a division by
zero). Every expected value is read off the records written here."""

import pytest
from test_sleight_summary_store import CLEAN, TRIALS, clean, trial, verdict, vote

from tamperbench.judge.records import ParseRateRecord
from tamperbench.sleight.spec import build_spec
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE
from tamperbench.sleight.summary import judge_setup, summarize
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
        "a": {"n_votes": 4, "parsed": 3, "partial": 1, "unparsed": 0, "parse_rate": 75.0, "partial_rate": 25.0,
              "unparsed_rate": 0.0},
        "b": {"n_votes": 0, "parsed": 0, "partial": 0, "unparsed": 0, "parse_rate": None, "partial_rate": None,
              "unparsed_rate": None},
    }


def _question(i, a, b, c, entity):
    """Question q<i>: a clean answer of surprisal 1 everywhere and one trial swapped at position 1 whose
    next three tokens have surprisal a, b, c; by hand its Delta is mean(window) - 1 (t1 in the store test)."""
    ck = f"c{i}"
    return (clean(ck, f"q{i}", [1.0] * 4, [2.0] * 4, [3.0] * 4),
            trial(f"t{i}", f"q{i}", "Mandela effect" if entity else "scarf", ck, 1, 5, [9.0, a, b, c],
                  [9.0, 3, 3, 3], [9.0, 4, 4, 4], [1], [(1, 1)], [[1.0, 1.0]], 1))


VALUES = [(1.0 + i, 1.0 + (5 * i) % 16, 1.0 + (7 * i) % 13) for i in range(16)]  # window means all distinct
N = len(VALUES)  # 16 questions, 8 entity and 8 word trials: enough distinct resamples for seeds to differ


@pytest.fixture
def eight(tmp_path):
    rows = [_question(i, *v, entity=i % 2 == 0) for i, v in enumerate(VALUES)]
    with RunStore.open(tmp_path / "run", build_spec(model="embedded", preset="quick", max_new_tokens=8)) as st:
        st.write(CLEAN_TABLE, [c for c, _ in rows])
        st.write(TRIALS_TABLE, [t for _, t in rows])
        yield st


ESTIMATES = ["delta_surprisal", "paired_surprisal"]


def test_seed_reaches_every_interval_and_defaults_to_0(eight):
    (s0,) = summarize(eight)
    (s0b,) = summarize(eight, seed=0)
    (s1,) = summarize(eight, seed=1)
    (s1b,) = summarize(eight, seed=1)
    assert s0 == s0b and s1 == s1b  # seeded: the same figures on every call
    # means by hand: every window mean minus the clean 1
    deltas = [(a + b + c) / 3 - 1 for a, b, c in VALUES]
    assert s0["delta_surprisal"]["mean"] == pytest.approx(sum(deltas) / N)
    assert s0["split"]["delta_surprisal_entity"]["mean"] == pytest.approx(sum(deltas[0::2]) / (N / 2))
    assert s0["split"]["delta_surprisal_words"]["mean"] == pytest.approx(sum(deltas[1::2]) / (N / 2))
    for key in ESTIMATES:
        assert s0[key]["mean"] == pytest.approx(s1[key]["mean"])
        assert (s0[key]["lo"], s0[key]["hi"]) != (s1[key]["lo"], s1[key]["hi"]), key  # another seed, other draws
    for key in ("delta_surprisal_entity", "delta_surprisal_words"):
        assert (s0["split"][key]["lo"], s0["split"][key]["hi"]) != (s1["split"][key]["lo"], s1["split"][key]["hi"])


def test_window_reaches_the_signals(eight):
    (w1,) = summarize(eight, window=1)
    # one token after the swap: a - 1
    assert w1["delta_surprisal"]["mean"] == pytest.approx(sum(a - 1 for a, _, _ in VALUES) / N)


def test_the_default_window_is_eight_tokens(tmp_path):
    # after the swap at 1: eight tokens of surprisal 1, then 10, 10. Window 8 -> 1 - 1 = 0; window 9 -> 18/9 - 1 = 1
    c = clean("cL", "qL", [1.0] * 12, [2.0] * 12, [3.0] * 12)
    s = [9.0] + [1.0] * 8 + [10.0, 10.0]
    t = trial("tL", "qL", "scarf", "cL", 1, 12, s, [9.0] + [2.0] * 10, [9.0] + [3.0] * 10, [1], [(1, 1)], [[1.0]], 1)
    with RunStore.open(tmp_path / "run", build_spec(model="embedded", preset="quick", max_new_tokens=8)) as st:
        st.write(CLEAN_TABLE, [c])
        st.write(TRIALS_TABLE, [t])
        means = [summarize(st, **kw)[0]["delta_surprisal"]["mean"] for kw in ({}, {"window": 8}, {"window": 9})]
    assert means == [pytest.approx(0.0), pytest.approx(0.0), pytest.approx(1.0)]


def test_unjudged_block_counts_coverage_and_rule_names(eight):
    (m,) = summarize(eight)
    assert m["judge"] == {"flagged": None, "flagged_entity": None, "ignored": None, "derailed": None,
                          "corrected": None, "aware": None, "n_judged": 0, "counts": {}}
    assert m["provenance_id"] == "p" and m["model"] == "m"
    assert (m["trials"], m["touched"], m["swaps"], m["coverage"]) == (N, N, N, 1.0)
    assert m["delta_rule"]["default"] == "reference" and "alternative" not in m["delta_rule"]


def test_no_occurrences_means_coverage_0_and_a_one_sided_gap(tmp_path):
    c, t = _question(0, 2.0, 2.0, 2.0, entity=True)
    none = trial("u1", "q0", "scarf", "c0", 1, 2, [], [], [], [], [], [], 0, untouched=True)
    with RunStore.open(tmp_path / "run", build_spec(model="embedded", preset="quick", max_new_tokens=8)) as st:
        st.write(CLEAN_TABLE, [c])
        st.write(TRIALS_TABLE, [none])
        (m,) = summarize(st)
        assert (m["swaps"], m["coverage"], m["untouched_pct"]) == (0, 0.0, 100.0)
        st.write(TRIALS_TABLE, [t])
        st.write("judge_verdicts", [verdict("t0", True, False, False, False, False)])
        (m,) = summarize(st)
    # only an entity trial is judged: the words side has no rate, so there is no gap (not an error)
    s = m["split"]
    assert (s["flagged_entity"], s["flagged_words"], s["flagged_gap"]) == (100.0, None, None)
    assert (s["derailed_entity"], s["derailed_words"], s["derailed_gap"]) == (0.0, None, None)


def test_paper_counts_accumulate_over_several_trials():
    from tamperbench.sleight.summary import paper_counts

    def t(entity, der, aware, untouched=False):
        return {"entity": entity, "untouched": untouched, "flagged": False, "corrected": False, "derailed": der,
                "aware": aware, "_sig": {"delta_surprisal": None, "delta_entropy_top20": None}}

    trials = [t(True, True, True), t(True, True, True), t(False, True, False), t(False, False, False),
              t(False, None, None, untouched=True), t(True, None, None, untouched=True)]
    c = paper_counts(trials, judged=True)
    # by hand: 6 trials, 2 untouched, 4 judged; derailed 3 (2 entity, 1 words), aware 2; ignored only the
    # all-False fourth (the third is derailed, so a label is assigned)
    assert (c["n"], c["unt"], c["jn"]) == (6, 2, 4)
    assert (c["der"], c["aware"], c["ign"], c["flag"], c["corr"]) == (3, 2, 1, 0, 0)
    assert (c["en"], c["e_der"], c["sn"], c["s_der"]) == (2, 2, 2, 1)
