"""``judge run --preset paper`` turns thinking off for hybrid-thinking jurors (issue 34, item 3).

The reference's ``scripts/panel_judge.py`` (fractalego/Sleight-of-Word) has ``--no-think``: "disable a
hybrid judge's thinking channel (Qwen3) so it emits JSON directly", sent as
``chat_template_kwargs={"enable_thinking": False}`` beside ``SamplingParams(temperature=0.0, max_tokens=256)``.
``data/qwen3_chat_template.jinja`` is Qwen3's real chat template (Qwen/Qwen3 ``tokenizer_config.json``,
Apache-2.0): it thinks unless told ``enable_thinking=false``, when it writes an empty think block.
gemma3.jinja is the shipped Gemma 3 template (not hybrid). Red before the change: ``judge.hybrid`` did
not exist and the paper preset left every juror at its template's default.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tamperbench.judge.hybrid import inspect_template, judge_thinking, resolve_paper_thinking
from tamperbench.judge.presets import judge_config
from tamperbench.judge.runner import load_votes, run_jury
from tamperbench.judge.samples import sample_rows, write_fixture_run
from tamperbench.store import RunStore

QWEN3 = (Path(__file__).parent / "data" / "qwen3_chat_template.jinja").read_text()
GEMMA3 = (Path(__file__).parents[3] / "src" / "tamperbench" / "models" / "templates" / "gemma3.jinja").read_text()
R1_LIKE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
           "{% if add_generation_prompt %}<|Assistant|><think>\n{% endif %}")  # opens the trace itself
ANSWER = json.dumps({"flagged": False, "corrected": True, "derailed": False, "aware": False})


class _Tokenizer:
    def __init__(self, template: str | None):
        self.chat_template = template


def _served(scripted_judge, name: str, template: str | None):
    """A judge served over HTTP whose tokenizer was named (``?tokenizer=``): the server applies the template."""
    judge = scripted_judge(name, lambda u, n: ANSWER)
    judge.server_side_template = True
    judge.tokenizer = _Tokenizer(template)
    return judge


def test_real_templates_are_read_for_hybrid_thinking():
    qwen = inspect_template(QWEN3, "qwen3")
    assert (qwen.hybrid, qwen.switch, qwen.thinks_by_default) == (True, "enable_thinking", True)
    gemma = inspect_template(GEMMA3, "gemma3")
    assert (gemma.hybrid, gemma.thinks_by_default) == (False, False)
    r1 = inspect_template(R1_LIKE, "r1")
    assert (r1.hybrid, r1.thinks_by_default) == (False, True)
    assert inspect_template(None, "unread").thinks_by_default is None


def test_the_paper_preset_switches_hybrid_jurors_off_and_says_so(tmp_path, scripted_judge):
    jury = {"qwen": _served(scripted_judge, "qwen", QWEN3), "gemma": _served(scripted_judge, "gemma", GEMMA3)}
    sent: dict[str, list] = {j: [] for j in jury}
    for name, judge in jury.items():
        original = judge.generate_chat

        def spy(convs, *, _orig=original, _name=name, **kw):
            sent[_name].append(kw.get("template_kwargs"))
            return _orig(convs, **kw)
        judge.generate_chat = spy
    cfg = judge_config("paper", list(jury), max_new_tokens=64, judged_text="safe")  # fixture rows: no special text
    assert cfg.no_think_hybrids == ("qwen", "gemma") and cfg.thinking == ()
    run = write_fixture_run(tmp_path / "run", sample_rows()[:2])
    heard: list = []
    summary = run_jury(run, list(jury), lambda spec: jury[spec], cfg, show_progress=False,
                       on_thinking=lambda lines, warnings: heard.append((lines, warnings)))
    ((lines, warnings),) = heard
    assert lines[0].startswith("qwen=off (enable_thinking=False; sent as chat_template_kwargs; the server's template) "
                               "[--preset paper: a hybrid template, off as the reference's --no-think]")
    assert "template: hybrid (reads enable_thinking), thinks by default" in lines[0]
    assert lines[1].startswith("gemma=default (the template's own); template: not hybrid, does not think by default")
    assert warnings == [] and summary.thinking == lines
    assert sent["qwen"] and all(kw == {"enable_thinking": False} for kw in sent["qwen"])
    assert sent["gemma"] and all(not kw for kw in sent["gemma"])
    with RunStore.open_existing(run) as store:
        rows = {r["judge"]: r for r in store.rows("judge_votes")}
    assert (rows["qwen"]["thinking"], rows["gemma"]["thinking"]) == ("off", "default")
    again = judge_config("paper", list(jury), max_new_tokens=64, judged_text="safe")  # the same jury resolves to the same votes
    resolved, _, _ = resolve_paper_thinking(again, jury)
    with RunStore.open_existing(run) as store:
        assert len(load_votes(store, list(jury), resolved.config_id)) == 4


def test_explicit_thinking_wins_and_a_default_thinker_under_256_tokens_is_warned(scripted_judge):
    jury = {"qwen": _served(scripted_judge, "qwen", QWEN3), "r1": _served(scripted_judge, "r1", R1_LIKE),
            "far": _served(scripted_judge, "far", None)}
    cfg = judge_config("paper", list(jury), thinking=["qwen=default"])
    assert cfg.max_new_tokens == 256 and cfg.no_think_hybrids == ("r1", "far")
    resolved, lines, warnings = resolve_paper_thinking(cfg, jury)
    assert resolved.thinking == () and resolved.no_think_hybrids == ()
    assert lines[0].startswith("qwen=default (the template's own); template: hybrid")
    assert lines[0].endswith("from the ?tokenizer= model (the server applies its own)")
    assert lines[2] == ("far=default (the template's own); template: not read, default unknown; from the server "
                        "(not readable here: add ?tokenizer=SPEC to the judge spec)")
    assert warnings == [
        "WARNING: judge qwen: its chat template thinks by default and thinking is default (pass --thinking qwen=off); "
        "with 256 new tokens a trace can fill the budget before the JSON verdict, which is then an unparsed vote",
        "WARNING: judge r1: its chat template thinks by default and thinking is default (pass --thinking r1=off); "
        "with 256 new tokens a trace can fill the budget before the JSON verdict, which is then an unparsed vote"]
    _, _, quiet = resolve_paper_thinking(judge_config("paper", list(jury), max_new_tokens=1024), jury)
    assert quiet == []  # a budget that leaves room for a trace
    default = judge_config("default", list(jury))
    assert default.no_think_hybrids == () and resolve_paper_thinking(default, jury)[0].thinking == ()


@pytest.mark.model
def test_a_local_judge_template_file_is_read(embedded_backend):
    from tamperbench.models.hf import HFBackend
    from tamperbench.models.templating import ChatTemplate

    qwen = HFBackend(embedded_backend.model, embedded_backend.tokenizer, embedded_backend.provenance, device="cpu",
                     max_batch_size=2, chat_template=ChatTemplate("file", QWEN3, label="qwen3.jinja"))
    info = judge_thinking(qwen)
    assert (info.switch, info.thinks_by_default, info.source) == ("enable_thinking", True, "--chat-template qwen3.jinja")
    own = judge_thinking(embedded_backend)  # SmolLM2's own template: not hybrid
    assert (own.hybrid, own.thinks_by_default, own.source) == (False, False, "the model's tokenizer")
