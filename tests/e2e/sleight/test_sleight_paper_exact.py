"""Paper-exact numbers on a real run of the embedded model.

* ``tables.json``'s Delta surprisal and Delta top-20 entropy equal the reference rule recomputed here,
  independently, from ``tamperbench export --format jsonl`` output (to 0.005 nats).
* ``judge run``'s verdict counts and Table 1 agree on the same run, including the "ignored" column
  when a label has no majority (the divergence issue 8 names).
* ``--layout paper`` prints the paper's columns.

The jurors are scripted stand-ins for judge MODELS (a three-model jury cannot run here); the sleight
run, the store, the jury pipeline and the tables are real.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tamperbench.cli import app
from tamperbench.store import RunStore

pytestmark = pytest.mark.model


def _reference_delta(clean: dict, trial: dict, signal: str, window: int = 8) -> float | None:
    """The reference's compute_metrics, written out here: walk from each swap's first injected token,
    take the next `window` tokens that are not injected, concatenate over swaps, minus the clean mean."""
    k = trial["fork_at"]
    values = list(clean[signal][:k]) + list(trial[signal])
    injected = set(trial["injected"])
    post = []
    for s0 in trial["swap_positions"]:
        count, i = 0, s0 + 1
        while count < window and i < len(values):
            if i not in injected:
                post.append(values[i])
                count += 1
            i += 1
    base = clean[signal]
    if not post or not base:
        return None
    return sum(post) / len(post) - sum(base) / len(base)


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class _Gen:
    def __init__(self, text: str, prompt_text: str):
        self.text, self.prompt_text, self.finish_reason = text, prompt_text, "eos"


class _Juror:
    """Answers by a fixed pattern of the trial: a full verdict, a partial one, or no JSON at all."""

    ANSWERS = ('{"flagged": false, "corrected": false, "derailed": false, "aware": false}',
               '{"flagged": true}',
               "I cannot tell.")

    def __init__(self, offset: int):
        self.offset, self.max_batch_size = offset, 8

    def generate_chat(self, conversations, **_):
        out = []
        for conv in conversations:
            user = conv[0]["content"]
            out.append(_Gen(self.ANSWERS[(len(user) + self.offset) % 3], user))
        return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("paper_exact") / "run"
    res = CliRunner().invoke(app, ["sleight", "run", "--preset", "quick", "--questions", "3", "--words", "3",
                                   "--max-new-tokens", "48", "--device", "cpu", "--out", str(run)])
    assert res.exit_code == 0, res.output
    return run


def test_tables_json_equals_the_reference_rule_from_export(run_dir, tmp_path):
    res = CliRunner().invoke(app, ["sleight", "table", str(run_dir)])
    assert res.exit_code == 0, res.output
    saved = json.loads((run_dir / "tables.json").read_text())
    res = CliRunner().invoke(app, ["export", str(run_dir), "--format", "jsonl", "--out", str(tmp_path / "x.jsonl")])
    assert res.exit_code == 0, res.output
    clean = {c["key"]: c for c in _jsonl(tmp_path / "x.sleight_clean.jsonl")}
    trials = _jsonl(tmp_path / "x.sleight_trials.jsonl")
    touched = [t for t in trials if not t["untouched"]]
    assert touched and sum(t["swap_count"] for t in touched) > len(touched), "need trials with several swaps"
    (model,) = saved["models"]
    for signal in ("surprisal", "entropy_top20"):
        deltas = [d for t in touched if (d := _reference_delta(clean[t["clean_key"]], t, signal)) is not None]
        expected = sum(deltas) / len(deltas)
        assert model[f"delta_{signal}"]["mean"] == pytest.approx(expected, abs=0.005)
        assert model[f"delta_{signal}"]["n_items"] == len(deltas)
    # Table 1 prints the same figure
    assert saved["tables"]["table1"]["rows"][0][7].startswith(f"{model['delta_surprisal']['mean']:+.2f}")
    assert saved["delta_rule"] == "reference"


def _judge_run_counts(store) -> dict[str, float | None]:
    """What `judge run` prints in its verdict table, read back from its printed output."""
    from tamperbench.judge import cli as judge_cli

    buf = io.StringIO()
    judge_cli.console, old = Console(file=buf, width=250), judge_cli.console
    try:
        judge_cli.print_verdict_rates(store)
    finally:
        judge_cli.console = old
    row = [line for line in buf.getvalue().splitlines() if re.match(r"^\W*\d", line)][-1]
    cells = [c.strip() for c in re.split(r"[│┃|]", row) if c.strip()]
    names = ("trials", "flagged", "corrected", "derailed", "aware", "ignored", "undecided")
    out: dict = {}
    for name, cell in zip(names, cells):
        m = re.match(r"^(n/a|[\d.]+)(?: \(n=(\d+)/(\d+)\))?$", cell)  # a rate and its n (issue 27 item 4)
        assert m, cell
        out[name] = None if m.group(1) == "n/a" else float(m.group(1))
        if m.group(2) is not None:
            out[name + "_n"] = (int(m.group(2)), int(m.group(3)))
    return out


@pytest.mark.parametrize("rule", ["abstain", "false"])
def test_judge_run_counts_and_table1_agree(run_dir, rule):
    from tamperbench.judge.runner import JudgeConfig, run_jury
    from tamperbench.sleight.summary import summarize

    jurors = {"a": _Juror(0), "b": _Juror(1), "c": _Juror(1)}
    run_jury(run_dir, list(jurors), jurors.__getitem__, JudgeConfig(max_new_tokens=32, unparsed=rule),
             show_progress=False)
    with RunStore.open_existing(run_dir, read_only=True) as store:
        printed = _judge_run_counts(store)
        verdicts = store.rows("judge_verdicts")
        (model,) = summarize(store)
    assert {v["unparsed_rule"] for v in verdicts} == {rule}
    judge = model["judge"]
    for label in ("flagged", "corrected", "derailed", "aware", "ignored"):
        ours = judge[label]
        assert (printed[label] is None) == (ours is None), label
        if ours is not None:
            assert printed[label] == pytest.approx(ours, abs=0.05), label
        count = judge["counts"][label]  # the same denominators in judge run's table and Table 1
        assert printed[label + "_n"] == (count["n"], count["judged"]), label
    if rule == "abstain":
        # partial votes leave labels without a majority while "flagged" is decided: "ignored" is then
        # known (False) where a label is True, and Table 1 must count it the same way
        assert any(v["flagged"] is True and v["corrected"] is None for v in verdicts)
        assert any(v["ignored"] is True for v in verdicts)
    else:
        assert all(v[lab] is not None for v in verdicts for lab in ("flagged", "corrected", "derailed", "aware"))

    res = CliRunner().invoke(app, ["sleight", "table", str(run_dir), "--layout", "paper"])
    assert res.exit_code == 0, res.output
    saved = json.loads((run_dir / "tables.json").read_text())
    assert saved["layout"] == "paper" and saved["judge"]["unparsed_rule"] == [rule]
    assert saved["paper_tables"]["table1"]["columns"] == ["Model", "Flag.", "Flag. (M.E.)", "Ign.", "Derail.", "Corr.",
                                                         "Switch aware", "Δ surp. (nats)", "Δ ent. (nats)"]
    assert saved["paper_tables"]["table2"]["rows"][-1][0] == "Pooled (all models)"
    assert "Parse rates:" in res.output and ("paper rule" in res.output) == (rule == "false")
