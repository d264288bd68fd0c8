"""``--judged-text reference``: the judge reads the reply with its special tokens, undefused (issue 27, item 3).

The reference stores ``reaction = tokenizer.decode(st.assistant_ids)`` (``src/awareness/runner.py`` of
fractalego/Sleight-of-Word): ``decode`` without ``skip_special_tokens``, so a reply that stopped on EOS
ends in the EOS string (``<|im_end|>`` for SmolLM2), and ``judge.py`` pastes it into the prompt as is.
tamperbench's default keeps the safe form (decoded without special tokens, special-token strings
defused). Red before the change: ``SleightTrial`` had no ``reaction_text_special`` and every prompt was
built from ``reaction_text`` with defusing.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tamperbench.errors import UserError
from tamperbench.judge.runner import JudgeConfig, run_jury
from tamperbench.judge.samples import sample_rows, write_fixture_run
from tamperbench.sleight.spec import build_spec
from tamperbench.sleight.records import CLEAN_TABLE, TRIALS_TABLE
from tamperbench.sleight.runner import clean_record, trial_record
from tamperbench.store import RunStore

ANSWER = json.dumps({"flagged": False, "corrected": True, "derailed": False, "aware": False})


def _trace(ids, injected=(), swaps=()):
    n = len(ids)
    return SimpleNamespace(token_ids=ids, logprobs=[-0.1] * n, entropy_full=[1.0] * n, entropy_top20=[0.5] * n,
                           injected=[i in injected for i in range(n)], swaps=list(swaps), mentions=0, spaceless=0,
                           topk_ids=None, topk_logprobs=None, finish_reason="eos", decode_seconds=0.0)


@pytest.fixture
def run(tmp_path, embedded_tokenizer):
    """A sleight run holding one real trial row whose reply stopped on SmolLM2's EOS token."""
    tok = embedded_tokenizer
    backend = SimpleNamespace(provenance_id="p0", chat_ids=lambda m: [1],
                              chat_text=lambda m: tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True),
                              decode=lambda ids, skip_special_tokens=True: tok.decode(
                                  list(ids), skip_special_tokens=skip_special_tokens))
    spec = build_spec(model="embedded", preset="quick", max_new_tokens=16)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    clean_ids = tok.encode("Paris is the capital of France.", add_special_tokens=False) + [eos]
    k = [tok.decode([i]) for i in clean_ids].index(" the")
    repl = tok.encode(" scarf", add_special_tokens=False)
    ids = clean_ids[:k] + repl + clean_ids[k + 1:]
    swap = SimpleNamespace(position=k, n_injected=len(repl), matched_clean_logprobs=[-0.5],
                           matched_clean_entropy_full=[1.0], matched_clean_entropy_top20=[0.5])
    c = clean_record(backend, spec, "q000", "what is the capital of France?", _trace(clean_ids), "ck")
    t = trial_record(backend, spec, "q000", "what is the capital of France?", c.prompt_text, "scarf",
                     _trace(ids, range(k, k + len(repl)), [swap]), clean_ids, c.key)
    assert t.reaction_text == "Paris is scarf capital of France."
    assert t.reaction_text_special == "Paris is scarf capital of France.<|im_end|>"
    with RunStore.open(tmp_path / "run", spec) as store:
        store.write(CLEAN_TABLE, [c])
        store.write(TRIALS_TABLE, [t])
    return tmp_path / "run"


def _judge(scripted_judge, tok):
    judge = scripted_judge("j", lambda user, turns: ANSWER)
    judge.tokenizer = tok  # its special tokens are what the safe form defuses
    return judge


def test_reference_text_keeps_the_eos_string_and_is_not_defused(run, scripted_judge, embedded_tokenizer):
    judge = _judge(scripted_judge, embedded_tokenizer)
    run_jury(run, ["j"], lambda s: judge, JudgeConfig(fence="paper", judged_text="reference"), show_progress=False)
    with RunStore.open_existing(run) as store:
        (vote,) = store.rows("judge_votes")
    assert "<<<\nParis is scarf capital of France.<|im_end|>\n>>>" in vote["prompt_text"]
    assert vote["defused_special_tokens"] == 0 and vote["judged_text"] == "reference"


def test_safe_text_is_the_default(run, scripted_judge, embedded_tokenizer):
    judge = _judge(scripted_judge, embedded_tokenizer)
    run_jury(run, ["j"], lambda s: judge, JudgeConfig(fence="paper"), show_progress=False)
    with RunStore.open_existing(run) as store:
        (vote,) = store.rows("judge_votes")
    assert "<<<\nParis is scarf capital of France.\n>>>" in vote["prompt_text"]
    assert vote["judged_text"] == "safe"


def test_a_run_stored_before_the_special_text_is_refused_before_any_write(tmp_path, scripted_judge):
    run = write_fixture_run(tmp_path / "old", sample_rows()[:2])
    judge = scripted_judge("j", lambda user, turns: ANSWER)
    with pytest.raises(UserError, match=r"^--judged-text reference: 2 of 2 trials of .* were stored without"):
        run_jury(run, ["j"], lambda s: judge, JudgeConfig(judged_text="reference"), show_progress=False)
    assert judge.calls == []
    with RunStore.open_existing(run) as store:
        assert not store.has_table("judge_votes")
