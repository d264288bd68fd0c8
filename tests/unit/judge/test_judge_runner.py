"""The judge run pipeline on a real RunStore with scripted judge models."""

import json
import shutil
from pathlib import Path

import pytest

from tamperbench.errors import UserError
from tamperbench.judge.agreement import compute_agreement
from tamperbench.judge.runner import JudgeConfig, run_jury
from tamperbench.judge.samples import SAMPLES, sample_rows, trial_row, write_fixture_run
from tamperbench.store import RunStore

JUDGE_TABLES = {"judge_votes", "judge_verdicts", "judge_evidence", "judge_agreement", "judge_parse_rates",
                "human_labels"}


def fixture_rows():
    return sample_rows() + [
        trial_row("qu", "what is the capital of Italy?", "cup", "Rome.", swap_count=0, untouched=True),
        trial_row("qe", "what is the capital of Italy?", "mug", "   ", swap_count=2),
    ]


@pytest.fixture(scope="module")
def template_run(tmp_path_factory):
    return write_fixture_run(tmp_path_factory.mktemp("judge_runner") / "run", fixture_rows())


@pytest.fixture
def run_dir(tmp_path, template_run):
    """A fresh copy of one run written through the store (copying the files is ~40x cheaper than
    writing them again; each test judges and changes its own copy)."""
    return Path(shutil.copytree(template_run, tmp_path / "run"))


def tables(run_dir):
    with RunStore.open_existing(run_dir) as s:
        return set(s.tables())


def rows(run_dir, table):
    with RunStore.open_existing(run_dir) as s:
        return s.rows(table)


def flip(answer_fn, label):
    def answer(text, turns):
        obj = json.loads(answer_fn(text, turns).strip("`json\n"))
        obj[label] = not obj[label]
        return json.dumps(obj)
    return answer


def test_three_judges_end_to_end(run_dir, scripted_judge, perfect):
    judges = {"a": scripted_judge("a", perfect), "b": scripted_judge("b", perfect),
              "c": scripted_judge("c", flip(perfect, "derailed"))}
    summary = run_jury(run_dir, list(judges), judges.__getitem__, JudgeConfig(), show_progress=False)
    assert (summary.n_trials, summary.n_judged, summary.n_untouched, summary.n_empty) == (len(SAMPLES) + 2,
                                                                                         len(SAMPLES), 1, 1)
    assert summary.new_votes == {"a": len(SAMPLES), "b": len(SAMPLES), "c": len(SAMPLES)}
    assert judges["a"].calls == [4, 2]  # batches of max_batch_size=4
    votes = rows(run_dir, "judge_votes")
    assert len(votes) == 3 * len(SAMPLES)
    assert all(v["status"] == "parsed" and v["prompt_text"] and v["raw_text"] for v in votes)
    assert {v["provenance_id"] for v in votes} == {"fake-a", "fake-b", "fake-c"}
    verdicts = {v["trial_key"]: v for v in rows(run_dir, "judge_verdicts")}
    assert len(verdicts) == len(SAMPLES)
    by_reply = {r.reaction_text: r.key for r in sample_rows()}
    for s in SAMPLES:
        v = verdicts[by_reply[s.reply]]
        assert {k: v[k] for k in s.labels} == s.labels  # 2 of 3 judges are right on every label
        assert v["ignored"] is (not any(s.labels.values()))
        assert v["n_judges"] == 3 and v["jury"] == ["a", "b", "c"]
    evidence = rows(run_dir, "judge_evidence")
    assert len(evidence) == len(SAMPLES)
    agreement = rows(run_dir, "judge_agreement")
    pair_ab = [r for r in agreement if r["kind"] == "cohen_pair" and r["rater_a"] == "a" and r["rater_b"] == "b"]
    assert all(r["accuracy"] == 1.0 for r in pair_ab)
    derail_ac = next(r for r in agreement if r["kind"] == "cohen_pair" and r["label"] == "derailed"
                     and r["rater_b"] == "c")
    assert derail_ac["accuracy"] == 0.0 and derail_ac["kappa"] == pytest.approx(-10 / 26)  # p_o = 0, p_e = 10/36
    fleiss = {r["label"]: r for r in agreement if r["kind"] == "fleiss"}
    assert set(fleiss) == {"flagged", "corrected", "derailed", "aware"} and fleiss["flagged"]["kappa"] == 1.0
    rates = rows(run_dir, "judge_parse_rates")
    assert {r["judge"]: r["unparsed_rate"] for r in rates} == {"a": 0.0, "b": 0.0, "c": 0.0}


def test_resume_after_interruption(run_dir, scripted_judge, perfect):
    class Crash(Exception):
        pass

    n = {"calls": 0}

    def crashing(text, turns):
        if n["calls"] >= 4:
            raise Crash
        n["calls"] += 1
        return perfect(text, turns)

    with pytest.raises(Crash):
        run_jury(run_dir, ["a"], lambda s: scripted_judge("a", crashing), JudgeConfig(), show_progress=False)
    assert len(rows(run_dir, "judge_votes")) == 4  # the first batch was stored
    again = scripted_judge("a", perfect)
    summary = run_jury(run_dir, ["a"], lambda s: again, JudgeConfig(), show_progress=False)
    assert summary.new_votes == {"a": len(SAMPLES) - 4} and again.calls == [len(SAMPLES) - 4]
    third = scripted_judge("a", perfect)
    run_jury(run_dir, ["a"], lambda s: third, JudgeConfig(), show_progress=False)
    assert third.calls == []  # nothing left to judge
    assert len(rows(run_dir, "judge_verdicts")) == len(SAMPLES)


def test_jury_change_replaces_verdicts(run_dir, scripted_judge, perfect):
    run_jury(run_dir, ["a"], lambda s: scripted_judge(s, perfect), JudgeConfig(), show_progress=False)
    run_jury(run_dir, ["a", "b"], lambda s: scripted_judge(s, perfect), JudgeConfig(), show_progress=False)
    verdicts = rows(run_dir, "judge_verdicts")
    assert len(verdicts) == len(SAMPLES) and {tuple(v["jury"]) for v in verdicts} == {("a", "b")}


def test_unparsed_judge_is_reported_and_abstains(run_dir, scripted_judge, perfect):
    judges = {"good": scripted_judge("good", perfect), "mute": scripted_judge("mute", lambda t, n: "no json")}
    summary = run_jury(run_dir, list(judges), judges.__getitem__, JudgeConfig(), show_progress=False)
    assert summary.status_counts["mute"]["unparsed"] == len(SAMPLES)
    rates = {r["judge"]: r["unparsed_rate"] for r in rows(run_dir, "judge_parse_rates")}
    assert rates == {"good": 0.0, "mute": 1.0}
    # 1 of 2 jurors cannot make a majority: every label undecided, none counted False
    assert all(v[k] is None for v in rows(run_dir, "judge_verdicts") for k in ("flagged", "aware"))


def test_no_sleight_records_is_a_user_error_and_writes_nothing(tmp_path, scripted_judge, perfect):
    empty = write_fixture_run(tmp_path / "empty", [])
    with pytest.raises(UserError, match="no sleight records"):
        run_jury(empty, ["a"], lambda s: scripted_judge(s, perfect), JudgeConfig(), show_progress=False)
    assert not tables(empty) & JUDGE_TABLES
    with pytest.raises(UserError, match="not a directory"):
        run_jury(tmp_path / "missing", ["a"], lambda s: scripted_judge(s, perfect), JudgeConfig())


def test_only_untouched_is_a_user_error(tmp_path, scripted_judge, perfect):
    run = write_fixture_run(tmp_path / "u", [trial_row("q", "q?", "cup", "x", swap_count=0, untouched=True)])
    with pytest.raises(UserError, match="nothing to judge"):
        run_jury(run, ["a"], lambda s: scripted_judge(s, perfect), JudgeConfig(), show_progress=False)
    assert not tables(run) & JUDGE_TABLES


def test_unloadable_judge_writes_nothing(run_dir, scripted_judge, perfect):
    def loader(spec):
        if spec == "broken":
            raise UserError("model 'broken': no such file")
        return scripted_judge(spec, perfect)

    with pytest.raises(UserError, match="--judge broken: cannot load"):
        run_jury(run_dir, ["a", "broken"], loader, JudgeConfig(), show_progress=False)
    assert not tables(run_dir) & JUDGE_TABLES


def test_duplicate_judges_rejected(run_dir, scripted_judge, perfect):
    with pytest.raises(UserError, match="more than once"):
        run_jury(run_dir, ["a", "a"], lambda s: scripted_judge(s, perfect), JudgeConfig(), show_progress=False)


def test_agreement_without_verdicts_is_a_user_error(run_dir):
    with RunStore.open_existing(run_dir) as s, pytest.raises(UserError, match="no judge verdicts"):
        compute_agreement(s)


def test_precheck_fails_before_any_model_load(run_dir, scripted_judge, perfect):
    loaded = []

    def loader(spec):
        loaded.append(spec)
        return scripted_judge(spec, perfect)

    def precheck(spec):
        if spec == "typo":
            raise UserError("model 'typo': path does not exist")

    with pytest.raises(UserError, match="--judge typo"):
        run_jury(run_dir, ["a", "b", "typo"], loader, JudgeConfig(), show_progress=False, precheck=precheck)
    assert loaded == [] and not tables(run_dir) & JUDGE_TABLES
