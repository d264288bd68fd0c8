"""The real embedded model: loading, provenance, the cache, and a greedy answer through the CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tamperbench.models.provenance import sha256_file
from tamperbench.models.sources import MANIFEST, embedded_gguf_path, resolve, tamperbench_home

pytestmark = pytest.mark.model


def test_provenance_names_the_weights(embedded_backend):
    prov = embedded_backend.provenance
    assert prov.sha256 == sha256_file(embedded_gguf_path())
    assert prov.quantization == "Q4_1 GGUF dequantized to float32"
    assert (prov.dtype, prov.device, prov.kind) == ("float32", "cpu", "embedded")
    assert prov.architecture == "LlamaForCausalLM" and prov.torch_version.startswith("2.13.0")
    assert len(embedded_backend.provenance_id) == 16


def test_chat_template_default_system_prompt(embedded_backend):
    text = embedded_backend.chat_text([{"role": "user", "content": "what is the capital of France?"}])
    assert "You are a helpful AI assistant named SmolLM" in text
    assert text.rstrip().endswith("<|im_start|>assistant")


def test_corrupt_cache_is_detected_and_rebuilt(tmp_path, embedded_backend, monkeypatch):
    """Copy the real cache, flip one byte of the weights, and resolve again: it must rebuild, byte for byte
    the same weights, reading the GGUF's header once (tokenizer, config and weights share one parse,
    ``models/gguf_once.py``; transformers alone parses it four times) and building gguf's tensor-name table
    once."""
    import gguf

    parses = []
    real_reader = gguf.GGUFReader

    class counting_reader(real_reader):  # noqa: N801 - stands in for gguf.GGUFReader
        def __init__(self, path, mode="r"):
            parses.append(str(path))
            super().__init__(path, mode)

    tables = []
    real_names = gguf.get_tensor_name_map

    def counting_names(arch, n_blocks):
        tables.append((arch, n_blocks))
        return real_names(arch, n_blocks)

    from transformers import modeling_gguf_pytorch_utils as hf_gguf

    values = []
    real_parse = hf_gguf._gguf_parse_value

    def counting_parse(part, types):
        values.append(id(part))
        return real_parse(part, types)

    monkeypatch.setattr(gguf, "GGUFReader", counting_reader)
    monkeypatch.setattr(gguf, "get_tensor_name_map", counting_names)
    monkeypatch.setattr(hf_gguf, "_gguf_parse_value", counting_parse)
    good = resolve("embedded")
    home = tmp_path / "home"
    shutil.copytree(tamperbench_home() / "models" / good.sha256, home / "models" / good.sha256)
    weights = home / "models" / good.sha256 / "model.safetensors"
    with open(weights, "r+b") as f:
        f.seek(weights.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    rebuilt = resolve("embedded", home=home)
    assert rebuilt.load_dir == weights.parent
    assert sha256_file(weights) == sha256_file(good.load_dir / "model.safetensors")
    assert (weights.parent / MANIFEST).is_file()
    assert not list((home / "models").glob(".partial-*")), "the temporary build folder must not be left behind"
    assert len(parses) == 1, parses
    assert len(tables) == 1, len(tables)  # the tensor-name table built once, not once per submodule (397)
    # every header value turned into Python once (transformers alone: once per read, four reads)
    assert len(values) == len(set(values)) > 49_152, (len(values), len(set(values)))
    assert gguf.GGUFReader is counting_reader and gguf.get_tensor_name_map is counting_names  # put back


def test_the_shared_reader_reads_what_gguf_reads():
    """``one_parse``'s reader (the mapped file as a plain array, ``models/gguf_once.py``) against gguf's own on the
    embedded GGUF: every header field's parts and every tensor's name, type, shape and bytes."""
    import gguf
    import numpy as np

    from tamperbench.models.gguf_once import one_parse
    from tamperbench.models.sources import embedded_gguf_path

    path = embedded_gguf_path()
    want = gguf.GGUFReader(path)
    with one_parse():
        got = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is got  # one parse per file inside the block
    assert type(got.data) is np.ndarray and type(want.data) is np.memmap
    assert list(got.fields) == list(want.fields) and len(want.fields) > 20
    for name, field in want.fields.items():
        other = got.fields[name]
        assert other.types == field.types and other.data == field.data, name
        assert len(other.parts) == len(field.parts), name
        assert b"".join(p.tobytes() for p in other.parts) == b"".join(p.tobytes() for p in field.parts), name
    assert len(got.tensors) == len(want.tensors) > 100
    for a, b in zip(got.tensors, want.tensors, strict=True):
        assert (a.name, a.tensor_type, list(a.shape)) == (b.name, b.tensor_type, list(b.shape))
        assert np.array_equal(a.data, b.data), a.name


def test_the_cached_weights_are_gguf_s_own_dequantization(embedded_backend):
    """The cache against gguf's own dequantizer, not against another build by the same code: the token
    embedding, layer 0's value projection (llama's GGUF permutes q and k only) and its norm are gguf's
    ``dequantize`` of the file's tensors, and the output head is the embedding itself (tied), as the loaded
    model holds them. The cache is built on the meta device with the dequantized tensors assigned
    (``sources._build_gguf_cache``); a head left untied, or a weight left at its random initial value, is red."""
    import gguf
    import numpy as np

    from tamperbench.models.gguf_once import one_parse
    from tamperbench.models.sources import embedded_gguf_path

    with one_parse():  # the fast header reader (test_the_shared_reader_reads_what_gguf_reads: the same tensors)
        reader = gguf.GGUFReader(embedded_gguf_path())
    tensors = {t.name: t for t in reader.tensors}
    model = embedded_backend.model

    def gguf_weight(name: str) -> np.ndarray:
        t = tensors[name]
        return gguf.quants.dequantize(t.data, t.tensor_type).reshape(model.state_dict()[WEIGHTS[name]].shape)

    for name, key in WEIGHTS.items():
        assert np.array_equal(model.state_dict()[key].numpy(), gguf_weight(name)), name
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


WEIGHTS = {"token_embd.weight": "model.embed_tokens.weight", "blk.0.attn_v.weight": "model.layers.0.self_attn.v_proj.weight",
           "blk.0.attn_norm.weight": "model.layers.0.input_layernorm.weight"}


def test_answer_and_models_commands(embedded_backend):
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "tamperbench.cli", "answer", "what is the capital of France?",
                          "--max-new-tokens", "12"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Paris" in out.stdout and "surprisal" in out.stdout
    models = subprocess.run([sys.executable, "-m", "tamperbench.cli", "models"], capture_output=True, text=True,
                            env=env, timeout=300)
    assert models.returncode == 0, models.stderr
    digest = embedded_backend.provenance.sha256
    assert f"embedded sha256: {digest}" in models.stdout
    assert "embedded model loads" in models.stdout
