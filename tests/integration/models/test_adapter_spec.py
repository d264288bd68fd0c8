"""``BASE+peft:ADAPTER_DIR``: a base model plus a peft adapter folder is one model spec.

Real weights throughout: a LoRA adapter is made with peft on the embedded model (random, nonzero
B so it changes the logits), saved with ``save_pretrained``, and loaded back through
``load_backend``. The adapted backend's logits equal peft's own model's (the merge is float rounding),
differ from the base's, and its provenance names the adapter's sha256. A folder that does not fit
the base is one ``error:`` line naming the folder, from the CLI's entry point (in-process: ``tb_inprocess``,
tests/conftest.py), before anything is stored.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.model


def _lora(model, folder: Path, layers=(20, 21)) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    cfg = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], layers_to_transform=list(layers),
                     init_lora_weights=False)
    peft_model = get_peft_model(copy.deepcopy(model), cfg).eval()
    peft_model.save_pretrained(str(folder))
    return peft_model


@pytest.fixture(scope="module")
def adapter(tmp_path_factory, embedded_backend):
    folder = tmp_path_factory.mktemp("adapter") / "lora"
    peft_model = _lora(embedded_backend.model, folder)
    ids = torch.tensor([embedded_backend.encode("The capital of France is")])
    with torch.inference_mode():
        want = peft_model(input_ids=ids).logits[0, -1]
    del peft_model
    return folder, ids, want


def test_adapter_spec_loads_through_peft(adapter, embedded_backend):
    from tamperbench.models import load_backend

    folder, ids, want = adapter
    b = load_backend(f"embedded+peft:{folder}", device="cpu")
    with torch.inference_mode():
        got = b.model(input_ids=ids).logits[0, -1]
        base = embedded_backend.model(input_ids=ids).logits[0, -1]
    assert torch.allclose(got, want, atol=1e-3), (got - want).abs().max()
    assert (got - base).abs().max() > 0.05, "the adapter must change the logits"
    prov = b.provenance
    assert prov.adapter == str(folder.resolve()) and len(prov.adapter_sha256 or "") == 64
    assert prov.peft_version and prov.sha256 == embedded_backend.provenance.sha256
    assert prov.weights_revision == f"peft:{prov.adapter_sha256[:16]}+{prov.sha256}"
    assert prov.id != embedded_backend.provenance.id
    # the base model's provenance id is what it was before adapters existed (no new keys in it)
    assert "adapter" not in json.dumps(embedded_backend.provenance.model_dump(exclude_none=True))


def _refused(tb_inprocess, tmp_path: Path, model: str) -> list[str]:
    run = tmp_path / "run"
    p = tb_inprocess("owmi", "run", "--preset", "quick", "--model", model, "--out", str(run), cwd=REPO)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert not run.exists(), "refused before the run directory is created"
    return [ln for ln in p.stderr.splitlines() if ln.strip()]


def test_mismatched_adapter_refused_before_compute(tmp_path, embedded_backend, tb_inprocess):
    """A LoRA made for a tiny llama (hidden 16) on the embedded model (hidden 576): one line naming the folder."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    tiny = AutoModelForCausalLM.from_config(LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=64))
    folder = tmp_path / "tiny-lora"
    _lora(tiny, folder, layers=(0, 1))
    lines = _refused(tb_inprocess, tmp_path, f"embedded+peft:{folder}")
    assert len(lines) == 1 and lines[0].startswith("error: model 'embedded+peft:"), lines
    assert str(folder) in lines[0] and "does not match the base model" in lines[0], lines[0]


def test_adapter_for_other_weights_refused(tmp_path, adapter, tb_inprocess):
    """The sidecar ``owmi known-positive`` writes names the base weights; other weights are refused."""
    import shutil

    from tamperbench.models.adapter import write_sidecar

    folder = tmp_path / "other"
    shutil.copytree(adapter[0], folder)
    write_sidecar(folder, "embedded", "0" * 64)
    lines = _refused(tb_inprocess, tmp_path, f"embedded+peft:{folder}")
    assert len(lines) == 1 and str(folder) in lines[0] and "trained on weights sha256 0000" in lines[0], lines


@pytest.mark.parametrize("spec, needle", [
    ("embedded+peft:", "no adapter folder after"),
    ("embedded+peft:/nonexistent/lora", "adapter folder /nonexistent/lora does not exist"),
    ("openai:http://x#m+peft:/tmp", "applies to local weights only"),
])
def test_bad_adapter_specs(spec, needle):
    from tamperbench.errors import UserError
    from tamperbench.models import load_backend

    with pytest.raises(UserError, match=needle):
        load_backend(spec, device="cpu")
