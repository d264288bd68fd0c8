"""``judge run --preset paper`` then ``sleight table --layout paper``: the tables name every judging rule.

The reference's jury (``scripts/panel_judge.py`` of fractalego/Sleight-of-Word) runs each judge at
``temperature=0.0, max_tokens=256``, with ``--no-think`` for hybrid judges, parses by
``judge._verdict_from`` and judges ``runner.py``'s ``tokenizer.decode(assistant_ids)`` text. After the
paper preset, ``tables.json`` must say which parse rule, judged text and thinking setting each judge
ran under (issue 27's acceptance check). A real sleight run of the embedded model, judged by it.
"""

from __future__ import annotations

import json

import pytest

from tamperbench.store import RunStore

pytestmark = pytest.mark.model


def test_paper_preset_names_parse_text_and_thinking_per_judge(tmp_path, tb_inprocess):
    run = tmp_path / "run"
    env = {"COLUMNS": "250"}
    proc = tb_inprocess("sleight", "run", "--out", str(run), "--questions", "1", "--words", "1",
                        "--max-new-tokens", "24", "--device", "cpu", env=env)
    assert proc.returncode == 0, proc.stderr
    # 24 tokens instead of the preset's 256 keep the CPU cost low (test_judge_presets checks the 256)
    proc = tb_inprocess("judge", "run", str(run), "--judge", "embedded", "--preset", "paper", "--thinking", "off",
                        "--max-new-tokens", "24", "--device", "cpu", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "reference parse: greedy first '{' to last '}'" in proc.stdout and "thinking: embedded=off" in proc.stdout
    with RunStore.open_existing(run) as store:
        votes = store.rows("judge_votes")
    assert votes and {(v["parse_rule"], v["judged_text"], v["thinking"], v["max_new_tokens"], v["attempts"])
                      for v in votes} == {("reference", "reference", "off", 24, 1)}
    assert all(v["retry_text"] is None for v in votes)  # the reference never retries

    proc = tb_inprocess("sleight", "table", str(run), "--layout", "paper", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Verdict parse: reference parse" in proc.stdout and "Judged text: reference: the reply decoded with" \
        in proc.stdout
    saved = json.loads((run / "tables.json").read_text())
    judge = saved["judge"]
    assert judge["parse_rule"] == ["reference"] and judge["parse_rule_text"][0].startswith("reference parse")
    assert judge["judged_text"] == ["reference"] and "special tokens" in judge["judged_text_rule"][0]
    assert judge["unparsed_rule"] == ["false"] and judge["fence"] == ["paper"]
    assert judge["judges"]["embedded"] == {"parse_rule": "reference", "judged_text": "reference", "thinking": "off",
                                           "template_kwargs": {"enable_thinking": False},
                                           "thinking_effect": "the template ignores it", "max_new_tokens": 24}
    assert saved["layout"] == "paper" and "counts" in saved["paper_tables"]["table1"]


def test_paper_preset_prints_each_jurors_thinking_and_switches_a_hybrid_off(tmp_path, tb_inprocess):
    """Issue 34, item 3: the embedded judge under Qwen3's real chat template (a hybrid thinker) is switched
    off by --preset paper alone, as the reference's --no-think; the CLI prints the setting per juror."""
    from pathlib import Path

    qwen3 = Path(__file__).parents[2] / "unit" / "judge" / "data" / "qwen3_chat_template.jinja"
    run = tmp_path / "run"
    env = {"COLUMNS": "400"}
    proc = tb_inprocess("sleight", "run", "--out", str(run), "--questions", "1", "--words", "1",
                        "--max-new-tokens", "24", "--device", "cpu", env=env)
    assert proc.returncode == 0, proc.stderr
    proc = tb_inprocess("judge", "run", str(run), "--judge", "embedded", "--preset", "paper", "--chat-template",
                        str(qwen3), "--max-new-tokens", "24", "--device", "cpu", env=env)
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert ("thinking: embedded=off (enable_thinking=False; switched by enable_thinking) [--preset paper: a hybrid "
            "template, off as the reference's --no-think]; template: hybrid (reads enable_thinking), thinks by "
            "default") in out
    with RunStore.open_existing(run) as store:
        votes = store.rows("judge_votes")
    assert votes and {v["thinking"] for v in votes} == {"off"}
    assert all(v["prompt_text"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") for v in votes)
