"""Provenance of a loaded model: enough to say exactly which weights produced a number.

Log-probs shift with dtype, device, batch size and library versions (lm-evaluation-harness
learned this the hard way), so every record points at one of these through ``provenance_id``.
"""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path

from pydantic import BaseModel, ConfigDict


_OMIT_IF_NONE = ("dtype", "device", "torch_version", "transformers_version", "linear_kernel",
                 "shared_prefix_attention", "adapter", "adapter_sha256", "peft_version")


class ModelProvenance(BaseModel):
    """Where a model came from and how it was loaded. Frozen: one per loaded backend."""

    model_config = ConfigDict(frozen=True)

    source: str
    kind: str  # embedded | local_dir | gguf | hub | openai
    resolved_path: str
    sha256: str
    revision: str | None = None
    quantization: str | None = None
    architecture: str | None = None
    # torch-only fields: None for a backend that runs no torch model in this process (an HTTP
    # server); omitted from the id when None so existing ids stay what they were
    dtype: str | None = None
    device: str | None = None
    torch_version: str | None = None
    transformers_version: str | None = None
    # the kernel the decoder's linears ran on when it is not torch's default: "onednn-packed" on CPU
    # float32 (models/decoding/packed_linear.py; logits move by float32 rounding, ~1e-4), decided once
    # at load so a run's records say which numbers they hold; omitted when None (ids stay as they were)
    linear_kernel: str | None = None
    # "cascade" where rows sharing a prompt prefix read its keys once a step, the two softmax parts
    # merged by log-sum-exp (models/decoding/cascade.py; float32 rounding, not bitwise SDPA);
    # "cascade-padded" where all groups' prefixes are read in one call, shorter ones padded;
    # "cascade-tree" where prefill is also a prefix tree reading each prefix once (models/prefix_tree.py); None
    # (omitted from the id) where every row holds a copy (TAMPERBENCH_SHARED_PREFIX_ATTENTION=copy)
    shared_prefix_attention: str | None = None
    # a peft adapter merged into the weights (``BASE+peft:DIR``, models/adapter.py): its folder, the
    # sha256 over its config and weights, and the peft version that applied it; omitted when None
    adapter: str | None = None
    adapter_sha256: str | None = None
    peft_version: str | None = None
    tamperbench_version: str
    python_version: str = platform.python_version()
    # "model" (the tokenizer's own), "none" (raw completion prompt) or "file:<sha256>:<path>";
    # left out of the id when "model" so ids of runs made before the option existed stay valid
    chat_template: str = "model"

    @property
    def weights_revision(self) -> str:
        """What names the weights a record was computed with: the revision (else the sha256) of
        the base, behind the adapter's sha256 where one is merged in (a retrained adapter at the same
        folder is other weights; first, so a shortened revision in a table still tells them apart)."""
        base = self.revision or self.sha256
        return f"peft:{self.adapter_sha256[:16]}+{base}" if self.adapter_sha256 else base

    @property
    def id(self) -> str:
        """Short stable id: the same weights loaded the same way give the same id."""
        data = self.model_dump()
        for key in _OMIT_IF_NONE:
            if data.get(key) is None:
                data.pop(key, None)
        if data.get("chat_template") == "model":
            data.pop("chat_template")
        canon = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    """sha256 of a file, streamed so a 100 GB shard does not need 100 GB of memory."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class HashMemo:
    """Remembers file hashes keyed by (path, size, mtime) in ``$TAMPERBENCH_HOME/hashes.json``.

    Hashing a 140 GB checkpoint on every load would dominate start-up; a file whose size and
    mtime have not changed is taken to have the same hash, as ``make`` and rsync assume.
    """

    def __init__(self, home: Path):
        self.path = home / "hashes.json"
        try:
            self._memo: dict[str, str] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self._memo = {}

    def sha256(self, path: Path) -> str:
        st = path.stat()
        memo_key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
        if memo_key not in self._memo:
            self._memo[memo_key] = sha256_file(path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            from tamperbench.safeio.files import atomic_write

            atomic_write(self.path, json.dumps(self._memo, indent=0))
        return self._memo[memo_key]

    def combined(self, files: list[Path]) -> str:
        """One hash over several weight files (name + hash of each, sorted by name)."""
        h = hashlib.sha256()
        for f in sorted(files, key=lambda p: p.name):
            h.update(f"{f.name}:{self.sha256(f)}\n".encode())
        return h.hexdigest()
