"""Pick a decoding batch size from the memory actually free, capped by the user's --batch-size.

Why: a batch that does not fit is a crash an hour into a run; a batch far below what fits wastes
most of the throughput (batch 64 decodes ~10x faster per token than batch 1 on CPU).
"""

from __future__ import annotations

import psutil
import torch

from tamperbench.errors import UserError

DEFAULT_CAP = 64  # beyond this CPU throughput stops improving; GPUs may pass a larger cap


def kv_bytes_per_token(model) -> int:
    cfg = model.config
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    itemsize = next(model.parameters()).element_size()
    return 2 * cfg.num_hidden_layers * heads * head_dim * itemsize


def free_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    return int(psutil.virtual_memory().available)


def choose_batch_size(model, device, *, seq_len: int = 1024, cap: int | None = None,
                      fraction: float = 0.5) -> int:
    """Largest batch whose KV cache, pending float32 distributions and activations fit in
    ``fraction`` of free memory, at most ``cap`` (default 64 on CPU, 256 on GPU)."""
    if cap is not None and cap < 1:
        raise UserError(f"--batch-size must be a positive integer, got {cap}")
    device = torch.device(device)
    cfg = model.config
    per_row = (kv_bytes_per_token(model) * seq_len * 2  # x2: buffer growth / compaction copies
               + 4 * cfg.vocab_size * 6  # logits, log-probs, probs, previous log-probs
               + 4 * seq_len * cfg.hidden_size * 4)  # prefill activations
    fit = max(1, int(free_bytes(device) * fraction) // per_row)
    default_cap = 256 if device.type == "cuda" else DEFAULT_CAP
    return max(1, min(fit, cap if cap is not None else default_cap))
