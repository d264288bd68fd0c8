"""``load_backend(spec)``: resolve a model spec, load it with transformers, attach provenance."""

from __future__ import annotations

from typing import TYPE_CHECKING

import tamperbench
from tamperbench.errors import UserError
from tamperbench.models.provenance import ModelProvenance
from tamperbench.models.sources import resolve

if TYPE_CHECKING:
    import torch

# torch is imported only once the input is known good: a typo in --device or --model is refused
# in a fraction of a second instead of after the ~2 s torch + transformers import.
DTYPES = ("float32", "float16", "bfloat16")


def check_device(device: str) -> None:
    """Refuse a bad --device without loading the model (torch is imported only to ask for cuda)."""
    if device not in ("cpu", "cuda", "auto"):
        raise UserError(f"--device: '{device}' is not one of cpu, cuda, auto")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device: cuda was asked for but torch sees no CUDA device")


def check_dtype(dtype: str | None) -> None:
    if dtype is not None and dtype not in DTYPES:
        raise UserError(f"--dtype: '{dtype}' is not one of {', '.join(DTYPES)}")


def resolve_device(device: str) -> torch.device:
    import torch

    check_device(device)
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str | None, device: torch.device) -> torch.dtype:
    """float32 on CPU (exact, and CPU half precision is slow); bfloat16 on GPU unless asked."""
    import torch

    if dtype is None:
        return torch.float32 if device.type == "cpu" else torch.bfloat16
    check_dtype(dtype)
    return getattr(torch, dtype)


def load_backend(spec: str = "embedded", *, device: str = "auto", dtype: str | None = None,
                 batch_size: int | None = None, chat_template: str | None = None):
    """Load a model spec through the scheme registry (see registry.py)."""
    from tamperbench.models.registry import load_backend as _load

    return _load(spec, device=device, dtype=dtype, batch_size=batch_size, chat_template=chat_template)


def load_hf(spec: str = "embedded", *, device: str = "auto", dtype: str | None = None,
            batch_size: int | None = None, chat_template: str | None = None):
    """Load a local / hub / GGUF spec into an :class:`~tamperbench.models.hf.HFBackend`."""
    from tamperbench.models.installable import default_chat_template
    from tamperbench.models.templating import MISSING_TEMPLATE_HINT, resolve_chat_template

    if chat_template is None:  # a shipped template for an installable base model (hashed into provenance)
        chat_template = default_chat_template(spec)
    template = resolve_chat_template(chat_template)  # a bad file is refused before any loading
    if batch_size is not None and batch_size < 1:
        raise UserError(f"--batch-size: must be a positive integer, got {batch_size}")
    check_device(device)
    check_dtype(dtype)
    src = resolve(spec)  # a missing path, a non-GGUF file, an unreachable hub id: refused before torch loads
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own progress bars cover long work; a 0.1 s weight load needs none

    from tamperbench.models.hf import HFBackend, choose_batch_size

    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    try:
        tok = AutoTokenizer.from_pretrained(src.load_dir)
    except Exception as err:
        raise UserError(f"model '{spec}': transformers could not load {src.load_dir} ({err})") from None
    if template.mode == "model" and getattr(tok, "chat_template", None) is None:  # before loading weights
        raise UserError(f"model '{spec}' has no chat template; {MISSING_TEMPLATE_HINT}")
    try:
        model = AutoModelForCausalLM.from_pretrained(src.load_dir, dtype=torch_dtype).to(dev).eval()
    except Exception as err:
        raise UserError(f"model '{spec}': transformers could not load {src.load_dir} ({err})") from None
    peft_version = None
    if src.adapter is not None:  # checked against the base by resolve(); applied through peft, merged
        import peft

        from tamperbench.models.adapter import AdapterInfo, apply

        model = apply(model, AdapterInfo(src.adapter, str(src.adapter_sha256)), spec)
        peft_version = peft.__version__
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    quant = src.quantization
    if quant and torch_dtype != torch.float32:
        quant = quant.replace("float32", f"float32, then cast to {str(torch_dtype).removeprefix('torch.')}")
    import transformers

    from tamperbench.models.decoding.packed_linear import packed_linears_for

    # decided here, once per loaded model (packed_linears_for caches it), so provenance names the kernel
    kernel = "onednn-packed" if packed_linears_for(model) is not None else None
    from tamperbench.models.decoding.cascade import cascade_mode

    shared_attention, _why = cascade_mode(model)  # likewise: how shared prompt prefixes are attended
    prov = ModelProvenance(
        source=spec,
        kind=src.kind,
        resolved_path=str(src.load_dir),
        sha256=src.sha256,
        revision=src.revision,
        quantization=quant,
        architecture=(model.config.architectures or [type(model).__name__])[0],
        dtype=str(torch_dtype).removeprefix("torch."),
        device=dev.type,
        torch_version=torch.__version__,
        transformers_version=transformers.__version__,
        linear_kernel=kernel,
        shared_prefix_attention=shared_attention,
        tamperbench_version=tamperbench.__version__,
        chat_template=template.label,
        adapter=str(src.adapter) if src.adapter is not None else None,
        adapter_sha256=src.adapter_sha256,
        peft_version=peft_version,
    )
    return HFBackend(model, tok, prov, device=dev, max_batch_size=choose_batch_size(model, dev, cap=batch_size),
                     chat_template=template)
