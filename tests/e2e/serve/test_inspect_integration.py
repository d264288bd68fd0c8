"""inspect-ai integration, for real and offline: inspect's `openai-api` provider against a real
`tamperbench serve` on 127.0.0.1 (the embedded model), compared with `tamperbench quote run` in process.

- the Exact Words task gives byte-identical answers, so identical verdicts, to `quote run`;
- the jury scorer labels a sample through a served judge;
- `tamperbench export RUN --format inspect` writes a log that inspect's `read_eval_log` loads.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from serve_helpers import Server

inspect_ai = pytest.importorskip("inspect_ai")

pytestmark = pytest.mark.model
ITEMS, BUDGET = "S01", 24


@pytest.fixture(scope="module")
def served(monkeypatch_module, server):
    """The session's server (tests/e2e/serve/conftest.py); inspect's openai-api provider sends its key."""
    monkeypatch_module.setenv("TAMPERBENCH_API_KEY", os.environ["TB_SERVE_TEST_KEY"])  # set by ``server``
    monkeypatch_module.setenv("TAMPERBENCH_BASE_URL", server.url)  # where a judge named openai-api/tamperbench/... goes
    return server


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


@pytest.fixture(scope="module")
def quote_run(tmp_path_factory, embedded_backend) -> Path:
    from tamperbench.quote.runner import QuoteRunSpec, run_quote

    out = tmp_path_factory.mktemp("inspect") / "quote"
    run_quote(QuoteRunSpec(model="embedded", item_ids=[ITEMS], max_new_tokens=BUDGET), out, backend=embedded_backend)
    return out


def _eval(task, served: Server, tmp_path: Path):
    logs = inspect_ai.eval(task, model="openai-api/tamperbench/embedded", model_base_url=served.url,
                           log_dir=str(tmp_path / "logs"), display="none")
    assert logs[0].status == "success", logs[0].error
    return logs[0]


def test_exact_words_task_scores_the_same_as_quote_run(served, quote_run, tmp_path) -> None:
    from tamperbench.inspect_ext.tasks import exact_words
    from tamperbench.store import RunStore

    log = _eval(exact_words(items=ITEMS, max_tokens=BUDGET), served, tmp_path)
    with RunStore.open_existing(quote_run, read_only=True) as store:
        ours = {(r["item_id"], r["arm"]): r for r in store.rows("quote_trials")}
    assert len(log.samples) == len(ours) == 2
    for sample in log.samples:
        item_id, arm = str(sample.id).split("/")
        record, score = ours[(item_id, arm)], sample.scores["exact_words_scorer"]
        assert sample.output.completion == record["response"]  # greedy through the server = in process
        assert (score.metadata["category"], score.metadata["sub_label"]) == (record["category"], record["sub_label"])
        assert score.value == ("C" if record["category"] == "faithful" else "I")


def test_the_jury_scorer_labels_a_sample_through_a_served_judge(served, tmp_path) -> None:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.model import GenerateConfig
    from inspect_ai.solver import generate

    from tamperbench.inspect_ext.scorers import sleight_jury

    task = Task(dataset=[Sample(input="what causes the phases of the moon?",
                                metadata={"trigger": "the", "substitution": "scarf"})],
                solver=generate(), scorer=sleight_jury(["openai-api/tamperbench/embedded"], max_tokens=48),
                config=GenerateConfig(temperature=0.0, max_tokens=12))
    log = _eval(task, served, tmp_path)
    score = log.samples[0].scores["sleight_jury"]
    assert set(score.value) == {"flagged", "corrected", "derailed", "aware"}
    assert len(score.metadata["votes"]) == 1 and score.metadata["rule"] == "abstain"
    for label, value in score.value.items():  # NaN exactly when the one-judge jury reached no majority
        assert math.isnan(value) == (score.metadata["labels"][label] is None)


def test_export_inspect_log_reads_back(quote_run, tmp_path, tb_inprocess) -> None:
    from inspect_ai.log import read_eval_log

    out = tmp_path / "run.eval"
    done = subprocess.run([sys.executable, "-m", "tamperbench.cli", "export", str(quote_run), "--format", "inspect",
                           "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    log = read_eval_log(str(out))
    assert log.eval.task == "tamperbench/quote" and len(log.samples) == 2
    with_scores = [s.scores["exact_words"].metadata["category"] for s in log.samples]
    assert sorted(with_scores) == sorted(s.metadata["category"] for s in log.samples)
    bad = tb_inprocess("export", str(quote_run), "--format", "inspect", "--out", str(tmp_path / "run.txt"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and ".eval or .json" in bad.stderr
