"""A base model plus an adapter folder, as one model spec: ``BASE+peft:ADAPTER_DIR``.

Why a spec string rather than a second option: every suite, record and run store already carries a
model as one spec string, so an adapted model (the OWMI known positive, a user's LoRA) runs through
``owmi run``, ``sleight run`` or the jury exactly like any other model, and its records name it.
``BASE`` is any local spec (``embedded``, a transformers directory, a ``.gguf``, a hub id);
``ADAPTER_DIR`` is a folder peft's ``save_pretrained`` wrote (``adapter_config.json`` plus
``adapter_model.safetensors``).

Loading goes through peft (``PeftModel.from_pretrained``) and the adapter is then merged into the
weights (``merge_and_unload``), so hooks, kernels and decoders see a plain transformers model: the
adapted model runs the identical code path as its base. Merging changes logits by float rounding only.

Checked before any compute (:func:`check`), each a one-line error naming the folder:

* the folder exists and holds an adapter config and adapter weights peft can read;
* every adapter tensor names a module of the base model with matching shapes (the base model is
  built on torch's ``meta`` device from its config, so no weights are loaded for the check);
* where the folder carries ``tamperbench-adapter.json`` (written by ``owmi known-positive``), the
  base weights' sha256 recorded there equals the base model's: an adapter trained on other weights
  of the same shape is refused rather than silently applied.

Provenance records the adapter folder and the sha256 over its files (``ModelProvenance.adapter*``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from tamperbench.errors import UserError

MARK = "+peft:"
CONFIG_MAX_BYTES = 1 << 20  # adapter_config.json and tamperbench-adapter.json are a few KiB
MAX_RANK = 1 << 16
PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-]+")  # a module name (peft matches list entries by suffix, not as a regex)
SIDECAR = "tamperbench-adapter.json"
CONFIG = "adapter_config.json"
WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


@dataclass(frozen=True)
class AdapterInfo:
    path: Path
    sha256: str


def split(spec: str) -> tuple[str, str | None]:
    """(base spec, adapter folder or None) of a model spec."""
    base, mark, adapter = spec.partition(MARK)
    if not mark:
        return spec, None
    if not base.strip():
        raise UserError(f"model '{spec}': no base model before '{MARK}' (write BASE{MARK}ADAPTER_DIR)")
    if not adapter.strip():
        raise UserError(f"model '{spec}': no adapter folder after '{MARK}' (write BASE{MARK}ADAPTER_DIR)")
    return base.strip(), adapter.strip()


def _files(folder: Path, spec: str) -> tuple[Path, Path]:
    if not folder.is_dir():
        raise UserError(f"model '{spec}': adapter folder {folder} does not exist")
    cfg = folder / CONFIG
    if not cfg.is_file():
        raise UserError(f"model '{spec}': adapter folder {folder} has no {CONFIG} (not a peft adapter)")
    weights = next((folder / w for w in WEIGHTS if (folder / w).is_file()), None)
    if weights is None:
        raise UserError(f"model '{spec}': adapter folder {folder} has no {' or '.join(WEIGHTS)}")
    return cfg, weights


def _tensor_shapes(weights: Path, folder: Path, spec: str) -> dict[str, tuple[int, ...]]:
    try:
        if weights.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(weights), framework="pt") as f:
                return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        import torch

        state = torch.load(weights, map_location="meta", weights_only=True)
        return {k: tuple(v.shape) for k, v in state.items()}
    except Exception as err:  # a truncated or foreign file
        raise UserError(f"model '{spec}': adapter folder {folder}: cannot read {weights.name} "
                        f"({type(err).__name__})") from None


def _module_path(key: str) -> tuple[str, str]:
    """('model.layers.3.self_attn.q_proj', 'lora_A') from a peft state-dict key."""
    key = key.removeprefix("base_model.model.")
    parts = key.split(".")
    for i, p in enumerate(parts):
        if p.startswith(("lora_", "ia3_", "hada_", "lokr_", "oft_", "boft_")):
            return ".".join(parts[:i]), p
    return ".".join(parts[:-1]), parts[-1]


def _check_shapes(shapes: dict[str, tuple[int, ...]], ranks: dict[str, int], base_dir: Path, folder: Path,
                  spec: str) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        cfg = AutoConfig.from_pretrained(base_dir)
        with torch.device("meta"):
            skeleton = AutoModelForCausalLM.from_config(cfg)
    except Exception as err:
        raise UserError(f"model '{spec}': cannot build the base model from {base_dir} ({type(err).__name__})") from None
    for key, shape in sorted(shapes.items()):
        path, kind = _module_path(key)
        try:
            module = skeleton.get_submodule(path)
        except AttributeError:
            raise UserError(f"model '{spec}': adapter folder {folder} does not match the base model: it adapts "
                            f"'{path}', which the base ({cfg.model_type}, {cfg.num_hidden_layers} layers) "
                            "does not have") from None
        rank_ok = True
        if kind in ("lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B") and len(shape) == 2:
            got_rank = shape[0] if kind.endswith("A") else shape[1]
            want_rank = next((r for k, r in ranks.items() if k and (path == k or path.endswith("." + k))), ranks[""])
            if got_rank != want_rank:
                raise UserError(f"model '{spec}': adapter folder {folder}: {CONFIG} says rank {want_rank} for "
                                f"'{path}', but {key} has shape {list(shape)} (rank {got_rank}); refusing it before "
                                "peft allocates the declared rank")
        if isinstance(module, torch.nn.Linear) and kind in ("lora_A", "lora_B") and len(shape) == 2:
            want = module.in_features if kind == "lora_A" else module.out_features
            got = shape[1] if kind == "lora_A" else shape[0]
            rank_ok = got == want
        if not rank_ok:
            raise UserError(f"model '{spec}': adapter folder {folder} does not match the base model: {key} has "
                            f"shape {list(shape)}, but '{path}' is {module.in_features} -> {module.out_features}")


def _names(value, field: str, folder: Path, spec: str) -> None:
    """``target_modules``/``exclude_modules``: a list of module names, or ``"all-linear"``. WHY: peft runs a
    string with ``re.fullmatch`` against every module name, and a pattern that backtracks catastrophically
    hangs the process past Ctrl-C; a list is matched by name, which cannot."""
    if value is None or value == "all-linear" and field == "target_modules":
        return
    if isinstance(value, str):
        raise UserError(f"model '{spec}': adapter folder {folder}: {CONFIG} field '{field}' is a string, which peft "
                        "runs as a regular expression; tamperbench accepts only a list of module names (e.g. "
                        '["q_proj", "v_proj"]) or "all-linear"')
    if not isinstance(value, list) or not all(isinstance(v, str) and PLAIN_NAME.fullmatch(v) for v in value):
        raise UserError(f"model '{spec}': adapter folder {folder}: {CONFIG} field '{field}' must be a list of module "
                        "names (letters, digits, '_', '.', '-')")


def _rank(value, field: str, folder: Path, spec: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RANK:
        raise UserError(f"model '{spec}': adapter folder {folder}: {CONFIG} field '{field}' must be an integer "
                        f"rank from 1 to {MAX_RANK}, got {json.dumps(value)[:80]}")
    return value


def _lora_config(cfg: dict, folder: Path, spec: str) -> dict[str, int]:
    """Refuse what peft would not merge or could be made to hang or allocate on: a non-LoRA adapter, a
    regex ``target_modules``, a rank out of range. Returns the declared rank per module name ("" for
    ``r``; ``rank_pattern`` keys must be plain module names too) for :func:`_check_shapes`."""
    kind = cfg.get("peft_type")
    if kind != "LORA":
        raise UserError(f"model '{spec}': adapter folder {folder}: peft_type {json.dumps(kind)[:60]} is not supported; "
                        "tamperbench applies LoRA adapters only (merged into the weights)")
    _names(cfg.get("target_modules"), "target_modules", folder, spec)
    _names(cfg.get("exclude_modules"), "exclude_modules", folder, spec)
    ranks = {"": _rank(cfg.get("r", 8), "r", folder, spec)}
    for field in ("rank_pattern", "alpha_pattern"):
        pattern = cfg.get(field) or {}
        if not isinstance(pattern, dict):
            raise UserError(f"model '{spec}': adapter folder {folder}: {CONFIG} field '{field}' must be an object")
        _names(list(pattern), field, folder, spec)
        if field == "rank_pattern":
            ranks.update({k: _rank(v, f"rank_pattern.{k}", folder, spec) for k, v in pattern.items()})
    return ranks


def check(spec: str, adapter: str, base_dir: Path, base_sha256: str) -> AdapterInfo:
    """Refuse an adapter folder that peft could not apply to this base; return its identity."""
    from tamperbench.models.provenance import sha256_file

    folder = Path(adapter).expanduser()
    cfg_path, weights = _files(folder, spec)
    from tamperbench.safeio.files import read_capped

    try:
        cfg = json.loads(read_capped(cfg_path, CONFIG_MAX_BYTES, CONFIG))
        if not isinstance(cfg, dict) or "peft_type" not in cfg:
            raise ValueError("no peft_type")
    except ValueError as err:
        raise UserError(f"model '{spec}': adapter folder {folder}: {CONFIG} is not a peft adapter config ({err})") from None
    ranks = _lora_config(cfg, folder, spec)
    sidecar = folder / SIDECAR
    if sidecar.exists():
        try:
            meta = json.loads(read_capped(sidecar, CONFIG_MAX_BYTES, SIDECAR))
            want = meta.get("base_sha256")
        except (ValueError, AttributeError):
            raise UserError(f"model '{spec}': adapter folder {folder}: {SIDECAR} is not a JSON object") from None
        if want is not None and not (isinstance(want, str) and re.fullmatch(r"[0-9a-f]{64}", want)):
            raise UserError(f"model '{spec}': adapter folder {folder}: {SIDECAR} field 'base_sha256': must be "
                            f"64 lowercase hex digits (a sha256), got {json.dumps(want)[:80]}")
        if want and want != base_sha256:
            raise UserError(f"model '{spec}': adapter folder {folder} does not match the base model: it was trained "
                            f"on weights sha256 {want[:16]}..., the base has {base_sha256[:16]}...")
    shapes = _tensor_shapes(weights, folder, spec)
    if not shapes:
        raise UserError(f"model '{spec}': adapter folder {folder}: {weights.name} holds no tensors")
    _check_shapes(shapes, ranks, base_dir, folder, spec)
    import hashlib

    h = hashlib.sha256()
    for f in (cfg_path, weights):
        h.update(f"{f.name}:{sha256_file(f)}\n".encode())
    return AdapterInfo(folder.resolve(), h.hexdigest())


def apply(model, info: AdapterInfo, spec: str):
    """The base model with the adapter applied through peft and merged into its weights."""
    from peft import PeftModel

    import warnings

    try:
        with warnings.catch_warnings():  # peft 0.21 calls a transformers property deprecated in 5.x: noise, not news
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            peft_model = PeftModel.from_pretrained(model, str(info.path))
    except Exception as err:  # the pre-check passed, so this is unusual: say what peft said
        msg = str(err).splitlines()[0] if str(err) else ""
        raise UserError(f"model '{spec}': peft cannot apply adapter folder {info.path} ({type(err).__name__}: "
                        f"{msg[:200]})") from None
    return peft_model.merge_and_unload().eval()


def write_sidecar(folder: Path, base_spec: str, base_sha256: str, **extra) -> None:
    """Name the base weights an adapter was trained on, so :func:`check` can refuse other weights."""
    from tamperbench.safeio.files import atomic_write

    atomic_write(Path(folder) / SIDECAR, json.dumps({"base_model": base_spec, "base_sha256": base_sha256, **extra},
                                                    indent=1, sort_keys=True))
