"""Parse a GGUF file's header once while its tokenizer, config and weights are read from it.

transformers reads a GGUF through ``gguf.GGUFReader`` once per call: ``AutoTokenizer``,
``AutoConfig`` and ``AutoModelForCausalLM.from_pretrained(gguf_file=...)`` (which reads the config
again before the weights) parse the same header four times. The header holds the whole vocabulary
as one field per string, so on Gemma 3's 262,144-token vocabulary each parse costs about 14 s on a
2-core CPU: 56 of the 73 s the first load of Gemma 3 took (``benchmarks/gguf_load.py``).

No transformers or gguf option shares one parse between these calls, so :func:`one_parse` hands
transformers a single read-only reader per file while the cache is built (transformers imports
``GGUFReader`` from ``gguf`` at call time, in ``load_gguf_checkpoint`` only). The reader maps the
file read-only (``mode='r'``); any other mode gets a fresh reader, as before.

Inside the block ``gguf.get_tensor_name_map`` is also built once per (architecture, block count):
transformers' ``get_gguf_hf_weights_map`` calls it once per submodule of the model it loads into (397
times for SmolLM2), and each call rebuilds the same name table of every tensor type and block (6 s of
the embedded model's 26 s cache build in a profile). transformers only reads the table (``get_name``).

The shared reader also holds the mapped file as a plain ``numpy.ndarray`` over the same read-only
mapping instead of a ``numpy.memmap``: parsing slices the file once per header field and array element,
and every slice of a ``memmap`` runs its Python-level ``__getitem__`` and ``__array_finalize__``. Same
bytes, same fields and tensors (``tests/integration/models/test_embedded_model.py``); Gemma 3's header
parse 12.3 -> 4.2 s (``benchmarks/gguf_load.py --parse-only``).

transformers then turns every field's parts into Python values, one call of its ``_gguf_parse_value`` per
array element, once for each of its four reads: on Gemma 3, 786,000 elements (the vocabulary's tokens, scores
and types) four times. Inside the block each part's value is kept the first time it is parsed (the shared
reader's parts live as long as the block; the values are strings and numbers, never changed), so the later
reads look it up.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()


@contextmanager
def one_parse() -> Iterator[dict[str, object]]:
    """Inside the block, ``gguf.GGUFReader(path)`` returns one reader per resolved path (read-only mode)."""
    import functools

    import gguf
    from transformers import modeling_gguf_pytorch_utils as hf_gguf

    original, original_names = gguf.GGUFReader, gguf.get_tensor_name_map
    original_parse = getattr(hf_gguf, "_gguf_parse_value", None)  # private: a transformers without it reads as before
    values: dict[tuple[int, int], object] = {}

    def parse_once(part, types):  # keyed by the objects themselves: the shared reader keeps both alive
        key = (id(part), id(types))
        if key not in values:
            values[key] = original_parse(part, types)
        return values[key]

    plain = _plain_reader(original)
    readers: dict[str, object] = {}
    shared_names = functools.cache(original_names)  # one table per (architecture, block count), for this block

    def shared_reader(path: os.PathLike[str] | str, mode: str = "r"):
        if mode != "r":
            return original(path, mode)
        key = os.path.realpath(os.fspath(path))
        if key not in readers:
            readers[key] = plain(path, mode)
        return readers[key]

    with _LOCK:  # one patch at a time; nested or concurrent builds wait rather than unpatch each other
        gguf.GGUFReader = shared_reader  # type: ignore[misc,assignment]
        gguf.get_tensor_name_map = shared_names  # type: ignore[assignment]
        if original_parse is not None:
            hf_gguf._gguf_parse_value = parse_once
        try:
            yield readers
        finally:
            gguf.GGUFReader = original  # type: ignore[misc]
            gguf.get_tensor_name_map = original_names
            if original_parse is not None:
                hf_gguf._gguf_parse_value = original_parse
            readers.clear()
            values.clear()
            shared_names.cache_clear()


def _plain_reader(base: type) -> type:
    """``base`` (``gguf.GGUFReader``) whose ``data`` is set as a plain array view of the memory map it opens
    (the module docstring): ``numpy.asarray`` drops the ``memmap`` subclass, keeps the buffer, copies nothing."""
    import numpy as np

    class PlainReader(base):  # type: ignore[misc,valid-type]
        @property
        def data(self):
            return self._plain_data

        @data.setter
        def data(self, value) -> None:
            self._plain_data = np.asarray(value)

    return PlainReader
