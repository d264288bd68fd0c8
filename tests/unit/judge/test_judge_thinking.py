"""Per-judge thinking through the chat template, recorded with every vote (issue 27, item 2).

The reference runs hybrid judges with ``--no-think``: ``scripts/panel_judge.py`` of
fractalego/Sleight-of-Word calls ``llm.chat(convs, sp, chat_template_kwargs={"enable_thinking": False})``
with ``SamplingParams(temperature=0.0, max_tokens=256)``. Qwen3's template answers that variable by
writing an empty ``<think>\\n\\n</think>\\n\\n`` after the assistant header; ``QWEN3_LIKE`` below is that
rule on SmolLM2's ChatML, and the model under it is the real embedded one. Red before the change:
``tamperbench.judge.thinking`` did not exist and ``judge_items`` sent no template kwargs.
"""

from __future__ import annotations

import json

import pytest

from tamperbench.errors import UserError
from tamperbench.judge.jury import judge_items
from tamperbench.judge.prompt import JudgeInput, load_prompt_spec
from tamperbench.judge.runner import JudgeConfig, load_votes, run_jury
from tamperbench.judge.samples import sample_rows, write_fixture_run
from tamperbench.judge.thinking import parse_thinking, thinking_setting
from tamperbench.models.hf import HFBackend
from tamperbench.models.templating import ChatTemplate
from tamperbench.store import RunStore, trial_key

CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{SWITCH}{% endif %}")
QWEN3_LIKE = CHATML.replace("{SWITCH}", "{% if enable_thinking is defined and enable_thinking is false %}"
                                        "<think>\n\n</think>\n\n{% endif %}")
DEEPSEEK_LIKE = CHATML.replace("{SWITCH}", "{% if thinking is defined and thinking %}<think>{% else %}</think>{% endif %}")


def _with_template(backend, text: str) -> HFBackend:
    return HFBackend(backend.model, backend.tokenizer, backend.provenance, device="cpu", max_batch_size=2,
                     chat_template=ChatTemplate("file", text, label="test"))


def test_parse_thinking_per_judge_and_for_all():
    assert parse_thinking(None, ["a", "b"]) == {"a": "default", "b": "default"}
    assert parse_thinking(["off"], ["a", "b"]) == {"a": "off", "b": "off"}
    assert parse_thinking(["on", "b=off"], ["a", "b"]) == {"a": "on", "b": "off"}
    assert parse_thinking(["openai:http://h/v1?model=q=off"], ["openai:http://h/v1?model=q"]) == \
        {"openai:http://h/v1?model=q": "off"}  # a judge spec may itself hold '='
    with pytest.raises(UserError, match="^--thinking: 'maybe': the mode must be one of default, on, off$"):
        parse_thinking(["maybe"], ["a"])
    with pytest.raises(UserError, match="'c' is not one of the --judge values"):
        parse_thinking(["c=off"], ["a"])


@pytest.mark.model
def test_the_switch_is_found_by_rendering_and_reaches_the_prompt(embedded_backend):
    smol = thinking_setting(embedded_backend, "off")  # SmolLM2's own template has no switch
    assert smol.template_kwargs == {"enable_thinking": False} and smol.effect == "the template ignores it"
    qwen = _with_template(embedded_backend, QWEN3_LIKE)
    off = thinking_setting(qwen, "off")
    assert off.template_kwargs == {"enable_thinking": False} and off.effect == "switched by enable_thinking"
    assert off.text == "off (enable_thinking=False; switched by enable_thinking)"
    deepseek = thinking_setting(_with_template(embedded_backend, DEEPSEEK_LIKE), "on")
    assert deepseek.template_kwargs == {"thinking": True} and deepseek.effect == "switched by thinking"
    assert thinking_setting(qwen, "default").template_kwargs == {}

    item = JudgeInput("t", "What is the capital of France?", "the", "scarf", "Scarf capital is Paris.")
    (vote,) = judge_items(qwen, "q", [item], max_new_tokens=4, parse="reference", template_kwargs=off.template_kwargs)
    assert vote.prompt_text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    (plain,) = judge_items(qwen, "q", [item], max_new_tokens=4, parse="reference")
    assert plain.prompt_text.endswith("<|im_start|>assistant\n")


def test_thinking_is_recorded_per_judge_and_joins_the_config_only_when_set(tmp_path, scripted_judge):
    answer = json.dumps({"flagged": False, "corrected": True, "derailed": False, "aware": False})
    jury = {"a": scripted_judge("a", lambda u, n: answer), "b": scripted_judge("b", lambda u, n: answer)}
    run = write_fixture_run(tmp_path / "run", sample_rows()[:2])
    cfg = JudgeConfig(thinking=(("a", "off"),), max_new_tokens=256, parse="reference")
    run_jury(run, list(jury), lambda spec: jury[spec], cfg, show_progress=False)
    with RunStore.open_existing(run) as store:
        rows = {r["judge"]: r for r in store.rows("judge_votes")}
        assert (rows["a"]["thinking"], rows["a"]["template_kwargs"]) == ("off", {"enable_thinking": False})
        assert rows["a"]["thinking_effect"] == "the template ignores it"  # a scripted judge has no template
        assert (rows["b"]["thinking"], rows["b"]["template_kwargs"]) == ("default", None)
        assert rows["a"]["parse_rule"] == "reference" and rows["a"]["max_new_tokens"] == 256
        assert len(load_votes(store, ["a", "b"], cfg.config_id)) == 4
    # the default config hashes exactly the fields it hashed before the new options existed: old votes keep their keys
    old = trial_key({"prompt_sha256": load_prompt_spec().sha256, "fence": "nonce", "max_new_tokens": 160, "seed": 0,
                     "temperature": 0.0})[:16]
    assert JudgeConfig().config_id == old
    assert JudgeConfig(thinking=(("a", "default"),)).config_id == old
    assert len({JudgeConfig(thinking=(("a", "off"),)).config_id, JudgeConfig(parse="reference").config_id,
                JudgeConfig(judged_text="reference").config_id, old}) == 4
