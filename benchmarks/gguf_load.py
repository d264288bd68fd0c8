"""First load of a GGUF model: transformers parsing the file's header once per call against once in all.

    python benchmarks/gguf_load.py [--model gemma3-270m|embedded] [--rounds 1] [--threads 2]

Each arm builds the dequantised safetensors cache (``models/sources.py``'s ``_build_gguf_cache``)
into a fresh temporary folder: ``per call`` with transformers' own reader (four header parses:
tokenizer, config, the model's config, the weights), ``one parse`` inside ``models/gguf_once.one_parse``.
Both arms write the same files; the script checks the safetensors hashes are equal.
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
    args = ap.parse_args()
    single_thread(args.threads)
    from tamperbench.models import gguf_once, sources
    from tamperbench.models.installable import MODELS, gemma_gguf

    home = Path(tempfile.mkdtemp(prefix="gguf-load-"))
    gguf = sources.embedded_gguf_path() if args.model == "embedded" else gemma_gguf(MODELS[args.model], home)
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


if __name__ == "__main__":
    main()
