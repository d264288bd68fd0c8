"""Pick a decoding batch size from the memory actually free and the prompt length being decoded.

Why: a batch that does not fit is a crash an hour into a run; a batch far below what fits wastes
most of the throughput (batch 64 decodes ~10x faster per token than batch 1 on CPU). The KV cache
of a row grows with its prompt: the Exact Words ``depth`` preset (~3,200-token prompts) holds
~150 MB of keys and values per row of the embedded model, so its no-reuse baseline at the length-
blind batch 64 held 13 GB. :func:`generation_batch` therefore sizes every generation call by its
own longest prompt; :func:`choose_batch_size` (load time, length unknown) guesses 1,024 tokens.

The rule (bytes; every term is what the step decoder and the prefill forwards allocate):

- per decoding row: KV bytes per token x the columns the decoder may hold for it
  (:func:`decoder_columns`), plus its pending float32 distributions and their step temporaries;
- once: the transient of one prefill forward (the decoder prefills at most ``PREFILL_TOKENS``
  tokens per forward, prefix sharing as many suffix rows as fit in that many columns): the
  forward's own KV, the activations of a llama-style layer at its peak, and the attention
  temporaries, which depend on the attention implementation (:func:`prefill_bytes`);
- once: a shared prefix held at batch 1 while its rows wait for slots (one prompt's KV).

With cascade attention (decoding/cascade.py) a row's KV is only its private part (its prompt after
its group's shared prefix, plus new tokens): ``private_len`` sizes the rows, the shared prefixes
(``shared_tokens``, all of one call's groups, as all may be live at once) are counted once, plus
the float32 attention scores of one layer over the prefix (3 tensors of rows x heads x columns),
plus the stacked copy the step reads them from when the prefixes differ in length
(``padded_tokens``: groups x the longest prefix; decoding/cascade.py's ``PaddedPrefixes``).

The largest batch whose total fits in ``fraction`` of free memory is taken, at most the cap.
tests/unit/models/test_memory_rule.py checks the rule against hand-computed numbers.

Two engines size their own batches from their real work: the Sleight of Word swap engine
(:func:`slot_batch`: its rows also park snapshots, one row's KV each) and OWMI's ragged teacher-
forced calibration batch (:func:`ragged_rows`: a DynamicCache, no slots); both say how the size was
chosen (:class:`BatchChoice`) so their records can carry it.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
import torch

from tamperbench.errors import UserError, printable

__all__ = ["DEFAULT_CAP", "BatchChoice", "choose_batch_size", "decoder_columns", "device_ceiling", "free_bytes",
           "generation_batch",
           "kv_bytes_per_token", "prefill_bytes", "ragged_rows", "rows_that_fit", "slot_batch"]

DEFAULT_CAP = 64  # beyond this CPU throughput stops improving; GPUs may pass a larger cap
# Tokens per prefill forward: the step decoder's _PREFILL_TOKENS and prefix_groups' _PREFILL_COLUMNS
# (tests/unit/models/test_memory_rule.py checks that the three agree).
PREFILL_TOKENS = 16384
# Activation floats alive per prefill token at a llama layer's MLP peak: residual, norm, q, the
# grouped keys/values repeated to every head, gate, up, act(gate) and their product; x 2.5 for
# allocator slack. Measured on the embedded model (peak RSS, one thread, sdpa): 4 rows x 3,200
# tokens peaked 423 MB above their KV (33 KB a token), 16 x 400 tokens 532 MB (83 KB); this rule
# says 96 KB a token (the prefill term then bounds every measured peak; eager too, 1 x 3,200).
_ACT_SLACK_X2 = 5  # twice the slack factor, to stay in integers


def kv_bytes_per_token(model) -> int:
    cfg = model.config
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    itemsize = next(model.parameters()).element_size()
    return 2 * cfg.num_hidden_layers * heads * head_dim * itemsize


def decoder_columns(prompt_len: int, new_tokens: int) -> int:
    """The most KV columns the step decoder may hold per row for prompts of ``prompt_len`` tokens.

    Rows admitted later are right-aligned, so leading columns no live row uses pile up; the decoder
    drops them (``_trim_leading``) only once they are a quarter of the columns, checks every 16
    steps, and grows its buffers 64 columns at a time: at most 4/3 of a row's span, plus 16 + 64.
    """
    return (4 * (prompt_len + new_tokens)) // 3 + 16 + 64


def _activation_bytes_per_token(cfg, itemsize: int) -> int:
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    inter = getattr(cfg, "intermediate_size", None) or 4 * cfg.hidden_size
    floats = 4 * cfg.hidden_size + 2 * heads * head_dim + 4 * inter
    return _ACT_SLACK_X2 * floats * itemsize // 2


def prefill_bytes(model, rows: int, length: int) -> int:
    """Transient bytes of one prefill forward of ``rows`` prompts of ``length`` tokens.

    The forward's own KV cache (copied into the decoder's buffers afterwards), the activations, and
    the attention temporaries: ``sdpa`` on CPU runs a flash kernel (measured: no rows x heads x L x L
    score matrix) but transformers hands it a 4-D boolean mask, rows x L x L bytes; ``eager``
    materialises the scores, the masked scores and the softmax in float32, 3 x rows x heads x L x L."""
    cfg = model.config
    itemsize = next(model.parameters()).element_size()
    tokens = rows * length
    per_token = kv_bytes_per_token(model) + _activation_bytes_per_token(cfg, itemsize)
    impl = getattr(cfg, "_attn_implementation", None) or "eager"
    if impl == "eager":
        square = 3 * cfg.num_attention_heads * 4
    elif impl == "sdpa":
        square = 1
    else:  # flash-attention-2 and kin: no square term at all
        square = 0
    return tokens * per_token + rows * length * length * square


def _state_bytes_per_row(cfg) -> int:
    # pending and previous log-probs, plus logits / log_softmax / softmax / entropy temporaries
    return 8 * 4 * cfg.vocab_size


def _row_kv_bytes(model, prompt_len: int, new_tokens: int, private_len: int | None) -> int:
    """One row's KV buffer: its whole prompt, or (cascade attention) only its private part."""
    return kv_bytes_per_token(model) * decoder_columns(prompt_len if private_len is None else private_len, new_tokens)


def footprint(model, rows: int, *, prompt_len: int, new_tokens: int, private_len: int | None = None,
              shared_tokens: int = 0, padded_tokens: int = 0, snapshot_len: int = 0) -> int:
    """Peak bytes of decoding ``rows`` rows of prompts up to ``prompt_len`` tokens (module docstring).
    ``private_len`` (cascade attention): the longest prompt part a row holds itself. ``snapshot_len``:
    columns of one parked row copy per row (the swap engine's snapshots, :func:`slot_batch`)."""
    cfg = model.config
    kv = kv_bytes_per_token(model)
    layers = cfg.num_hidden_layers
    # growing a buffer reallocates one layer's keys or values at a time; trimming clones one
    per_row_kv = _row_kv_bytes(model, prompt_len, new_tokens, private_len)
    kv_total = rows * per_row_kv + (3 * rows * per_row_kv) // (2 * layers)
    chunk_rows = max(1, min(rows, PREFILL_TOKENS // max(1, prompt_len)))
    held_prefix = kv * prompt_len
    if private_len is not None:
        held_prefix = (kv * (max(prompt_len, shared_tokens) + padded_tokens)
                       + 12 * rows * cfg.num_attention_heads * prompt_len)
    return (kv_total + rows * _state_bytes_per_row(cfg) + prefill_bytes(model, chunk_rows, prompt_len)
            + held_prefix + rows * kv * snapshot_len)


def rows_that_fit(model, *, prompt_len: int, new_tokens: int, budget: int, cap: int = 1 << 16,
                  private_len: int | None = None, shared_tokens: int = 0, padded_tokens: int = 0,
                  snapshot_len: int = 0) -> int:
    """Largest batch (at most ``cap``) whose :func:`footprint` is within ``budget`` bytes; 0 if none."""
    lo, hi = 0, cap
    while lo < hi:  # footprint grows with rows: binary search
        mid = (lo + hi + 1) // 2
        if footprint(model, mid, prompt_len=prompt_len, new_tokens=new_tokens, private_len=private_len,
                     shared_tokens=shared_tokens, padded_tokens=padded_tokens, snapshot_len=snapshot_len) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _cgroup_free() -> int | None:
    """Bytes left under a cgroup v2 memory limit (containers): /proc/meminfo shows the host's."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text())
    except (OSError, ValueError):
        return None


def free_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    avail = int(psutil.virtual_memory().available)
    cg = _cgroup_free()
    return avail if cg is None else max(0, min(avail, cg))


_noted: set[str] = set()


def _note(msg: str) -> None:
    """A one-line note on stderr, once per distinct message (a run calls generation many times)."""
    if msg not in _noted:
        _noted.add(msg)
        print(f"note: {printable(msg)}", file=sys.stderr, flush=True)


def _gb(n: int) -> str:
    return f"{n / 2**30:.1f} GB"


def generation_batch(model, device, *, prompt_len: int, new_tokens: int, cap: int, fraction: float = 0.5,
                     budget: int | None = None, private_len: int | None = None, shared_tokens: int = 0,
                     padded_tokens: int = 0) -> int:
    """Rows to decode at once for prompts up to ``prompt_len`` tokens: at most ``cap`` (the
    backend's batch size, a user's ``--batch-size``), lowered with a note when it would not fit.

    Why lower instead of refusing: what fits depends on each call's longest prompt and on what other
    processes hold at that moment, neither of which a user can know when typing ``--batch-size``; a
    smaller batch decodes the same greedy tokens (and sampling is seeded per conversation), so it
    changes speed, not results. Refused (one line) only when not even one row fits.
    ``private_len``/``shared_tokens``/``padded_tokens``: rows read their shared prefixes once (see
    :func:`footprint`)."""
    if cap < 1:
        raise UserError(f"--batch-size must be a positive integer, got {cap}")
    device = torch.device(device)
    if budget is None:
        budget = int(free_bytes(device) * fraction)
    fit = rows_that_fit(model, prompt_len=prompt_len, new_tokens=new_tokens, budget=budget, cap=cap,
                        private_len=private_len, shared_tokens=shared_tokens, padded_tokens=padded_tokens)
    if fit < 1:
        need = footprint(model, 1, prompt_len=prompt_len, new_tokens=new_tokens, private_len=private_len,
                         shared_tokens=shared_tokens, padded_tokens=padded_tokens)
        raise UserError(f"a {prompt_len}-token prompt needs {_gb(need)} to decode, but only {_gb(budget)} "
                        f"is available for it ({fraction:g} of free {device.type} memory); free memory or "
                        f"shorten the prompt")
    if fit < cap:
        row = _row_kv_bytes(model, prompt_len, new_tokens, private_len)
        _note(f"batch lowered from {cap} to {fit} rows for prompts of up to {prompt_len} tokens + {new_tokens} "
              f"new: KV {row / 2**20:.0f} MB a row, {_gb(budget)} available ({fraction:g} of free memory)")
    return fit


def choose_batch_size(model, device, *, seq_len: int = 1024, cap: int | None = None,
                      fraction: float = 0.5) -> int:
    """Load-time batch size, before any prompt is known: the rows that fit at ``seq_len`` tokens, at
    most ``cap`` (default 64 on CPU, 256 on GPU). Each generation call re-checks with its own
    prompt length (:func:`generation_batch`)."""
    if cap is not None and cap < 1:
        raise UserError(f"--batch-size must be a positive integer, got {cap}")
    device = torch.device(device)
    budget = int(free_bytes(device) * fraction)
    default_cap = 256 if device.type == "cuda" else DEFAULT_CAP
    limit = cap if cap is not None else default_cap
    fit = max(1, rows_that_fit(model, prompt_len=seq_len, new_tokens=0, budget=budget, cap=limit))
    if cap is not None and fit < cap:
        _note(f"--batch-size {cap} lowered to {fit}: {cap} rows of {seq_len} tokens would not fit in "
              f"{_gb(budget)} ({fraction:g} of free {device.type} memory)")
    return fit


@dataclass(frozen=True)
class BatchChoice:
    """How many rows an engine decodes at once, and why: stored beside its records, so a record says
    which batch produced it (greedy tokens do not depend on it; timings and float rounding may).

    ``by``: ``memory`` (fewer rows fit than asked for), ``batch_size`` (the user's ``--batch-size``),
    ``device`` (the device's throughput ceiling, :func:`device_ceiling`) or ``work`` (every row the
    work can fill fits)."""

    rows: int
    by: str
    cap: int | None  # the user's --batch-size; None: not given
    ceiling: int | None  # the device ceiling that applied without a --batch-size (None: none)
    limit: int  # rows the work itself can fill
    prompt_len: int  # the longest prompt the size was computed for
    new_tokens: int
    budget_bytes: int  # the memory it had to fit in

    def record(self) -> dict:
        """Flat ``batch_*`` keys for engine stats and records."""
        return {f"batch_{k}": v for k, v in asdict(self).items()}


def _hard(cap: int | None, ceiling: int | None, limit: int) -> int:
    """The most rows asked for: the work's rows, under the user's cap, else under the ceiling."""
    top = cap if cap is not None else ceiling
    return limit if top is None else min(top, limit)


def _choice(fit: int, cap: int | None, ceiling: int | None, limit: int, prompt_len: int, new_tokens: int,
            budget: int) -> BatchChoice:
    if fit < _hard(cap, ceiling, limit):
        by = "memory"
    elif cap is not None:
        by = "batch_size" if cap <= limit else "work"
    else:
        by = "device" if ceiling is not None and ceiling <= limit else "work"
    return BatchChoice(fit, by, cap, None if cap is not None else ceiling, limit, prompt_len, new_tokens, budget)


SLOT_CEILING_CPU = 128  # the swap engine's fastest slot count measured on CPU (device_ceiling)


def device_ceiling(device) -> int:
    """Slots of the swap engine past which a device stops gaining throughput. CPU: measured on the
    2-core machine (one thread, 30 paper questions x 8 words x 64 tokens, tokens per CPU second, load
    average ~3): 32 rows 194; 64 rows 213-220 (4 runs); 128 rows 226-231 (3 runs); 256 rows 218;
    the 498 that memory allowed 153 -- the largest batch memory allows is not the fastest, so
    without a ``--batch-size`` memory only lowers this ceiling. GPU: the load-time default cap (256),
    not measured here. A user's ``--batch-size`` may pass it (memory still bounds it)."""
    return 256 if torch.device(device).type == "cuda" else SLOT_CEILING_CPU


def _budget(device: torch.device, fraction: float, free: int | None) -> int:
    return int((free_bytes(device) if free is None else free) * fraction)


def slot_batch(model, device, *, prompt_len: int, new_tokens: int, limit: int, cap: int | None = None,
               ceiling: int | None = None, fraction: float = 0.5, free: int | None = None) -> BatchChoice:
    """Slots of the Sleight of Word swap engine (sleight/engine.py) for its real context: rows of
    prompts up to ``prompt_len`` tokens and ``new_tokens`` of budget, as many as fit in memory, at
    most ``limit`` (the rows its questions can fill) and the user's ``cap`` when given (never
    exceeded), else at most ``ceiling`` (None: :func:`device_ceiling`).

    A row costs what :func:`footprint` counts for a decoder row plus one parked snapshot of a whole
    row (prompt + budget columns): a question's snapshot waits for free slots while its trials queue,
    and a trial's matched branch waits as one when no slot is free; at most about one per row is alive
    (new questions are admitted only when the waiting trials leave slots free). Matched branches add
    rows, not columns (they end within the budget). ``free``: bytes free (None: read this machine)."""
    if cap is not None and cap < 1:
        raise UserError(f"--batch-size must be a positive integer, got {cap}")
    device = torch.device(device)
    budget = _budget(device, fraction, free)
    limit = max(1, limit)
    ceiling = device_ceiling(device) if ceiling is None else ceiling
    span = prompt_len + new_tokens
    fit = rows_that_fit(model, prompt_len=prompt_len, new_tokens=new_tokens, budget=budget,
                        cap=_hard(cap, ceiling, limit), snapshot_len=span)
    if fit < 1:
        need = footprint(model, 1, prompt_len=prompt_len, new_tokens=new_tokens, snapshot_len=span)
        raise UserError(f"a {prompt_len}-token prompt with {new_tokens} new tokens needs {_gb(need)} to decode, but "
                        f"only {_gb(budget)} is available ({fraction:g} of free {device.type} memory); free memory "
                        f"or lower --max-new-tokens")
    choice = _choice(fit, cap, ceiling, limit, prompt_len, new_tokens, budget)
    if choice.by == "memory" and cap is not None:
        _note(f"--batch-size {cap} lowered to {fit} rows: prompts of up to {prompt_len} tokens + {new_tokens} new "
              f"would not fit in {_gb(budget)} ({fraction:g} of free memory)")
    return choice


def ragged_footprint(model, rows: int, *, length: int, block: int, vocab_floats: int) -> int:
    """Peak bytes of a teacher-forced ragged batch (owmi/ragged.py) of ``rows`` rows up to ``length``
    tokens, fed ``block`` positions a forward: the DynamicCache (every row padded to the longest,
    grown by concatenation, so one layer's keys or values exist twice for a moment), one forward's
    transient (:func:`prefill_bytes` of the block, its mask or scores against ``length`` columns),
    and ``vocab_floats`` float32 logits / log-probs held at once (the caller's own count)."""
    cfg = model.config
    kv = kv_bytes_per_token(model) * rows * length
    square = {"eager": 3 * cfg.num_attention_heads * 4, "sdpa": 1}.get(
        getattr(cfg, "_attn_implementation", None) or "eager", 0)
    itemsize = next(model.parameters()).element_size()
    forward = rows * block * (kv_bytes_per_token(model) + _activation_bytes_per_token(cfg, itemsize))
    return kv + kv // cfg.num_hidden_layers + forward + rows * block * length * square + 4 * vocab_floats


def ragged_rows(model, device, *, length: int, limit: int, block_tokens: int, fraction: float = 0.5,
                free: int | None = None) -> BatchChoice:
    """Rows of one OWMI ragged teacher-forced batch (``limit`` wanted, each up to ``length`` tokens):
    every row at once when they fit, else the most that do. Each forward feeds ``block_tokens //
    rows`` positions a row and keeps three float32 blocks of ``block_tokens`` x vocabulary (logits,
    their log-softmax, the kept per-row log-probs). Refused in one line when not even one row fits."""
    device = torch.device(device)
    budget = _budget(device, fraction, free)
    vocab = int(model.config.vocab_size)

    def fits(r: int) -> bool:
        return ragged_footprint(model, r, length=length, block=max(1, block_tokens // r),
                                vocab_floats=3 * block_tokens * vocab) <= budget

    lo, hi = 0, max(1, limit)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    if lo < 1:
        raise UserError(f"a {length}-token teacher-forced row needs more than the {_gb(budget)} available "
                        f"({fraction:g} of free {device.type} memory); free memory or lower js_chunk")
    return _choice(lo, None, None, max(1, limit), length, 0, budget)
