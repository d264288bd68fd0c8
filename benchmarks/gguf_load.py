"""First load of a GGUF model: transformers parsing the file's header once per call against once in all.

    python benchmarks/gguf_load.py [--model gemma3-270m|embedded] [--rounds 1] [--threads 2]
    python benchmarks/gguf_load.py --parse-only [--model ...] [--rounds 3]

Each arm builds the dequantised safetensors cache (``models/sources.py``'s ``_build_gguf_cache``)
into a fresh temporary folder: ``per call`` with transformers' own reader (four header parses:
tokenizer, config, the model's config, the weights), ``one parse`` inside ``models/gguf_once.one_parse``.
Both arms write the same files; the script checks the safetensors hashes are equal.

``--parse-only``: one header parse, ``gguf.GGUFReader`` over its ``numpy.memmap`` against the reader
``one_parse`` hands out (the same mapping as a plain array, ``models/gguf_once.py``); the script checks
both read the same fields and tensor bytes.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

from _harness import Arm, compare, parser, report, single_thread


def main() -> None:
    ap = parser(__doc__, rounds=1)
    ap.add_argument("--model", default="gemma3-270m", help="gemma3-270m (needs `models install`) or embedded")
    ap.add_argument("--parse-only", action="store_true", help="time one header parse: memmap reader vs plain array")
    args = ap.parse_args()
    single_thread(args.threads)
    from tamperbench.models import gguf_once, sources
    from tamperbench.models.installable import MODELS, gemma_gguf

    home = Path(tempfile.mkdtemp(prefix="gguf-load-"))
    gguf = sources.embedded_gguf_path() if args.model == "embedded" else gemma_gguf(MODELS[args.model], home)
    if args.parse_only:
        parse_only(gguf, args.rounds)
        shutil.rmtree(home, ignore_errors=True)
        return
    hashes: dict[str, str] = {}

    def build(name: str, patched: bool):
        def run() -> None:
            folder = home / name
            shutil.rmtree(folder, ignore_errors=True)
            ctx = nullcontext() if patched else mock.patch.object(gguf_once, "one_parse", nullcontext)
            with ctx:
                sources._build_gguf_cache(gguf, folder)
            files = json.loads((folder / sources.MANIFEST).read_text())["files"]
            hashes[name] = json.dumps({k: v["sha256"] for k, v in files.items() if v["sha256"]}, sort_keys=True)
        return run

    result = compare([Arm("per call", build("per-call", False)), Arm("one parse", build("one-parse", True))],
                     rounds=args.rounds, warmup=False)
    report(result)
    print(f"model: {gguf.name}; safetensors identical: {hashes['per-call'] == hashes['one-parse']}")
    shutil.rmtree(home, ignore_errors=True)


def parse_only(path: Path, rounds: int) -> None:
    import gguf as gguf_py

    from tamperbench.models.gguf_once import _plain_reader

    readers: dict[str, object] = {}

    def parse(name: str, cls):
        def run() -> None:
            readers[name] = cls(path)
        return run

    plain = _plain_reader(gguf_py.GGUFReader)
    result = compare([Arm("memmap", parse("memmap", gguf_py.GGUFReader)), Arm("plain array", parse("plain", plain))],
                     rounds=rounds, warmup=False)
    report(result)
    a, b = readers["memmap"], readers["plain"]
    same = (list(a.fields) == list(b.fields)
            and all(b"".join(p.tobytes() for p in a.fields[k].parts) == b"".join(p.tobytes() for p in b.fields[k].parts)
                    for k in a.fields)
            and all(x.name == y.name and x.data.tobytes() == y.data.tobytes() for x, y in zip(a.tensors, b.tensors)))
    print(f"model: {path.name}; fields and tensors identical: {same}")


if __name__ == "__main__":
    main()
