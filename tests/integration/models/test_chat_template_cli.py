"""``--chat-template`` and the prompt-length guard through the CLI's console entry point, in-process
(``tb_inprocess``, tests/conftest.py: argv, typer, the error path, the exit status; the embedded model is
the session's). ``answer`` and ``sleight run`` keep their subprocess smoke tests
(tests/integration/models/test_embedded_model.py, tests/e2e/store/test_new_race.py).

The model directory is a real transformers directory built here with no download: a tiny
randomly initialised llama (2 layers, hidden 32) saved with ``save_pretrained``, plus the embedded
model's tokenizer with its chat template removed, i.e. what a base model looks like on disk.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

pytestmark = pytest.mark.model  # needs the embedded model's tokenizer files (dequantized cache)


@pytest.fixture
def _cli(tb_inprocess):
    return tb_inprocess


@pytest.fixture(scope="module")
def base_model_dir(tmp_path_factory, embedded_backend) -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = tmp_path_factory.mktemp("base-model")
    tok = AutoTokenizer.from_pretrained(embedded_backend.provenance.resolved_path)
    tok.chat_template = None
    tok.save_pretrained(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok_cfg = json.loads((out / "tokenizer_config.json").read_text())
    tok_cfg.pop("chat_template", None)  # absent, as in a base model's files (save_pretrained writes null)
    (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    assert not (out / "chat_template.jinja").exists()
    assert "chat_template" not in json.loads((out / "tokenizer_config.json").read_text())
    return out


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_base_model_without_template_is_refused_in_one_line_naming_the_option(base_model_dir, tmp_path, _cli):
    proc = _cli("sleight", "run", "--model", str(base_model_dir), "--questions", "1", "--words", "1",
                "--max-new-tokens", "8", "--device", "cpu", "--out", str(tmp_path / "run"))
    line = _one_error_line(proc)
    assert "has no chat template" in line and "--chat-template none" in line and "--chat-template FILE" in line


def test_sleight_run_with_chat_template_none_records_it(base_model_dir, tmp_path, _cli):
    run = tmp_path / "run"
    proc = _cli("sleight", "run", "--model", str(base_model_dir), "--chat-template", "none", "--questions", "1",
                "--words", "1", "--max-new-tokens", "8", "--device", "cpu", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((run / "spec.json").read_text())["chat_template"] == "none"
    with duckdb.connect(str(run / "records.duckdb"), read_only=True) as con:
        provs = con.execute("SELECT id, record FROM provenance").fetchall()
        clean = con.execute("SELECT provenance_id, prompt_text, question FROM sleight_clean").fetchall()
    assert len(provs) == 1
    pid, record = provs[0][0], json.loads(provs[0][1])
    assert record["chat_template"] == "none" and record["resolved_path"] == str(base_model_dir)
    assert clean and all(p == pid for p, _, _ in clean)
    assert all(text == question for _, text, question in clean)  # the raw question, no role markers


def test_chat_template_file_is_used_and_hashed(base_model_dir, tmp_path, _cli):
    tpl = tmp_path / "tpl.jinja"
    tpl.write_text("{% for m in messages %}<<{{ m['role'] }}>> {{ m['content'] }}\n{% endfor %}<<assistant>>")
    proc = _cli("answer", "Why is the sky blue?", "--model", str(base_model_dir), "--chat-template", str(tpl),
                "--max-new-tokens", "3", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    from tamperbench.models import load_backend

    be = load_backend(str(base_model_dir), device="cpu", chat_template=str(tpl))
    import hashlib

    assert be.provenance.chat_template == f"file:{hashlib.sha256(tpl.read_bytes()).hexdigest()}:{tpl.resolve()}"
    assert be.chat_text([{"role": "user", "content": "hi"}]) == "<<user>> hi\n<<assistant>>"
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}")
    line = _one_error_line(_cli("answer", "x", "--model", str(base_model_dir), "--chat-template", str(bad)))
    assert "--chat-template" in line and str(bad) in line


def test_prompt_past_the_context_is_refused_before_any_compute(tmp_path, _cli):
    question = "Why is the sky blue? " * 6200  # ~130 KB, ~31k tokens against the embedded model's 8192
    assert len(question.encode()) > 128_000
    start = time.perf_counter()
    proc = _cli("answer", question, "--max-new-tokens", "12", "--device", "cpu")
    seconds = time.perf_counter() - start
    line = _one_error_line(proc)
    assert line.startswith("error: question: prompt is ") and "12 new tokens" in line
    assert "context length of 8192 tokens" in line
    prompt_tokens = int(line.split("prompt is ")[1].split(" tokens")[0])
    assert prompt_tokens > 8192
    assert seconds < 120, seconds  # load + tokenize only; the unguarded run took minutes
