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
    import gguf

    original = gguf.GGUFReader
    readers: dict[str, object] = {}

    def shared_reader(path: os.PathLike[str] | str, mode: str = "r"):
        if mode != "r":
            return original(path, mode)
        key = os.path.realpath(os.fspath(path))
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    with _LOCK:  # one patch at a time; nested or concurrent builds wait rather than unpatch each other
        gguf.GGUFReader = shared_reader  # type: ignore[misc,assignment]
        try:
            yield readers
        finally:
            gguf.GGUFReader = original  # type: ignore[misc]
            readers.clear()
