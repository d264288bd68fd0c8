"""vLLM backend on a real GPU: runs wherever CUDA and vllm are present, skips with the reason otherwise."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed (pip install 'tamperbench[vllm]')"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine"),
]


def test_vllm_chat_and_blackbox_completion_agree_with_transformers(tmp_path):
    from tamperbench.models import load_backend

    hf = load_backend("embedded", device="cuda", dtype="float32")
    vb = load_backend(f"vllm:{hf.provenance.resolved_path}", dtype="float32")
    conv = [[{"role": "user", "content": "what is the capital of France?"}]]
    assert vb.generate_chat(conv, max_new_tokens=12)[0].text == hf.generate_chat(conv, max_new_tokens=12)[0].text
    ids = hf.chat_ids(conv[0])
    comp = vb.complete(ids, max_tokens=8, echo=True)
    assert len(comp.token_ids) == 8 and len(comp.top[0]) >= 1 and comp.prompt_logprobs[0] is None
