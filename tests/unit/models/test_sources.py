"""Model spec resolution: every bad spec is one UserError naming the culprit (no hub access here)."""

from __future__ import annotations

import json
import os

import pytest

from tamperbench.errors import UserError
from tamperbench.models.sources import MANIFEST, _cache_ok, embedded_gguf_path, is_gguf, resolve
from tamperbench.models.provenance import HashMemo, sha256_file


def test_missing_path(tmp_path):
    with pytest.raises(UserError, match="path does not exist"):
        resolve(str(tmp_path / "nope"), home=tmp_path)
    with pytest.raises(UserError, match="path does not exist"):
        resolve("missing-model.gguf", home=tmp_path)


def test_file_that_is_not_gguf(tmp_path):
    bogus = tmp_path / "weights.gguf"
    bogus.write_bytes(b"PK\x03\x04 not a gguf at all")
    with pytest.raises(UserError, match="not a GGUF file"):
        resolve(str(bogus), home=tmp_path)


def test_directory_without_config(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(UserError, match="no config.json"):
        resolve(str(tmp_path / "m"), home=tmp_path)


def test_hub_id_offline_says_how_to_pass_a_path(tmp_path, monkeypatch):
    # The hub is unreachable from this machine (and HF_HUB_OFFLINE is set by conftest): that is the case tested.
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(UserError, match="org-that-does-not-exist/model.*local directory or .gguf path"):
        resolve("org-that-does-not-exist/model", home=tmp_path)


def test_openai_spec_has_no_local_files(tmp_path):
    with pytest.raises(UserError, match="names a remote server, not local files"):
        resolve("openai:http://127.0.0.1:8000/v1#m", home=tmp_path)


def test_embedded_gguf_is_shipped():
    path = embedded_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and is_gguf(path)


def test_cache_manifest_detects_truncation_and_corruption(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_bytes(bytes(range(256)) * 64)
    (folder / "config.json").write_text("{}")
    files = {p.name: {"size": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns,
                      "sha256": sha256_file(p) if p.suffix == ".safetensors" else None}
             for p in folder.iterdir()}
    (folder / MANIFEST).write_text(json.dumps({"files": files}))
    assert _cache_ok(folder)
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF
    weights.write_bytes(bytes(data))
    st = weights.stat()
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # coarse clocks: make the write visible
    assert not _cache_ok(folder), "a flipped byte (a write, so a new mtime) must invalidate the cache"
    weights.write_bytes(bytes(data[:1000]))
    assert not _cache_ok(folder), "a truncated file must invalidate the cache"
    (folder / MANIFEST).unlink()
    assert not _cache_ok(folder), "a cache without manifest is partial"


def test_hash_memo_reuses_unchanged_files(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"abc")
    memo = HashMemo(tmp_path)
    first = memo.sha256(f)
    assert first == sha256_file(f)
    assert HashMemo(tmp_path).sha256(f) == first
    f.write_bytes(b"abcd")
    assert HashMemo(tmp_path).sha256(f) != first


def test_negative_batch_size_is_refused_before_loading():
    from tamperbench.models import load_backend

    with pytest.raises(UserError, match="--batch-size"):
        load_backend("embedded", batch_size=-1)


def test_spec_file_errors_name_file_and_field(tmp_path):
    from tamperbench.spec_base import FrozenSpec, load_spec_file

    class Spec(FrozenSpec):
        max_new_tokens: int = 8

    good = tmp_path / "good.json"
    good.write_text('{"max_new_tokens": 4}')
    assert load_spec_file(good, Spec).max_new_tokens == 4
    typo = tmp_path / "typo.json"
    typo.write_text('{"max_new_tokns": 4}')
    with pytest.raises(UserError, match=r"typo.json: field 'max_new_tokns': not a field"):
        load_spec_file(typo, Spec)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"max_new_tokens": "many"}')
    with pytest.raises(UserError, match=r"wrong.json: field 'max_new_tokens'"):
        load_spec_file(wrong, Spec)
