"""A bounded walk over a GGUF file's header, before any library reads it.

WHY not ``gguf.GGUFReader`` first: it trusts the header. A 72-byte file that declares a metadata array
of 2^40 elements makes it build Python objects for each (past 4 GB within a minute), and transformers'
GGUF loader reads the header the same way. Here every declared count and length is checked against the
bytes the file has left *before* anything is read or allocated: a string of N bytes needs N bytes, an
array of N fixed-size elements needs N times their size, a tensor of N elements needs at least N bits.
The walk reads the header only (strings one at a time, fixed-size arrays skipped with ``seek``), so its
memory is bounded by the longest string the file can hold.

Only the scalar values are kept (``general.file_type`` names the quantization in provenance).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import BinaryIO

from tamperbench.errors import UserError

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NESTING = 4
MAX_STRING = 64 << 20  # one metadata string (a chat template, a merges line) is far smaller


class _Walk:
    def __init__(self, fh: BinaryIO, size: int, where: str):
        self.fh, self.size, self.where = fh, size, where

    def left(self) -> int:
        return self.size - self.fh.tell()

    def bad(self, why: str) -> UserError:
        return UserError(f"{self.where}: not a valid GGUF file: {why} (at byte {self.fh.tell()} of {self.size})")

    def need(self, n: int, what: str) -> None:
        if n < 0 or n > self.left():
            raise self.bad(f"{what} declares {n} bytes, but the file has {self.left()} left")

    def unpack(self, fmt: str, what: str):
        n = struct.calcsize(fmt)
        self.need(n, what)
        return struct.unpack(fmt, self.fh.read(n))[0]

    def string(self, what: str, keep: bool = True) -> str | None:
        n = self.unpack("<Q", f"the length of {what}")
        if n > MAX_STRING:
            raise self.bad(f"{what} is {n} bytes long (at most {MAX_STRING} allowed)")
        self.need(n, what)
        if not keep:
            self.fh.seek(n, os.SEEK_CUR)
            return None
        return self.fh.read(n).decode("utf-8", errors="replace")

    def value(self, kind: int, what: str, depth: int = 0):
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind], what)
        if kind == _STRING:
            return self.string(what)
        if kind != _ARRAY:
            raise self.bad(f"{what} has unknown value type {kind}")
        if depth >= MAX_NESTING:
            raise self.bad(f"{what} nests arrays more than {MAX_NESTING} deep")
        elem = self.unpack("<I", f"the element type of {what}")
        count = self.unpack("<Q", f"the length of {what}")
        if elem in _SCALARS:
            self.need(count * struct.calcsize(_SCALARS[elem]), f"{what} ({count} elements)")
            self.fh.seek(count * struct.calcsize(_SCALARS[elem]), os.SEEK_CUR)
            return None
        smallest = 8 if elem == _STRING else 12  # a string's length field; an array's type and length
        if elem not in (_STRING, _ARRAY):
            raise self.bad(f"{what} has unknown element type {elem}")
        self.need(count * smallest, f"{what} ({count} elements)")
        for _ in range(count):
            if elem == _STRING:
                self.string(f"an element of {what}", keep=False)
            else:
                self.value(_ARRAY, f"an element of {what}", depth + 1)
        return None


def read_header(path: Path, where: str | None = None) -> dict[str, object]:
    """The scalar metadata of a GGUF file (key -> value), after checking every count and length in its
    header against the file's size; a file that lies is one line naming it and the field."""
    path = Path(path)
    where = where or f"model '{path}'"
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        w = _Walk(fh, size, where)
        if w.left() < 4 or fh.read(4) != b"GGUF":
            raise UserError(f"{where}: not a GGUF file (missing the 'GGUF' magic bytes)")
        version = w.unpack("<I", "the version")
        if version not in (2, 3):
            raise w.bad(f"version {version} (tamperbench reads GGUF versions 2 and 3)")
        n_tensors = w.unpack("<Q", "the tensor count")
        n_kv = w.unpack("<Q", "the metadata count")
        w.need(n_kv * 13, f"{n_kv} metadata entries")  # key length (8) + value type (4) + 1 byte of value
        w.need(n_tensors * 24, f"{n_tensors} tensors")  # name length, dims, type, offset
        meta: dict[str, object] = {}
        for i in range(n_kv):
            key = w.string(f"metadata key {i}") or ""
            kind = w.unpack("<I", f"the value type of '{key[:80]}'")
            value = w.value(kind, f"metadata '{key[:80]}'")
            if value is not None and not isinstance(value, str) or isinstance(value, str) and len(value) < 256:
                meta[key] = value
        for i in range(n_tensors):
            name = (w.string(f"tensor name {i}") or "")[:80]
            n_dims = w.unpack("<I", f"the dimension count of tensor '{name}'")
            if n_dims > MAX_DIMS:
                raise w.bad(f"tensor '{name}' has {n_dims} dimensions (at most {MAX_DIMS})")
            elements = 1
            for _ in range(n_dims):
                elements *= w.unpack("<Q", f"a dimension of tensor '{name}'")
            if elements > size * 8:  # every GGML type spends at least a bit per element
                raise w.bad(f"tensor '{name}' declares {elements} elements, more than a {size}-byte file can hold")
            w.unpack("<I", f"the type of tensor '{name}'")
            w.unpack("<Q", f"the data offset of tensor '{name}'")
    return meta


def quantization(meta: dict[str, object]) -> str:
    """Provenance's quantization text for a GGUF's ``general.file_type`` (the generic text when unknown)."""
    try:
        from gguf import LlamaFileType

        kind = LlamaFileType(int(meta["general.file_type"])).name.replace("MOSTLY_", "")  # type: ignore[call-overload]
        return f"{kind} GGUF dequantized to float32"
    except Exception:
        return "GGUF dequantized to float32"
