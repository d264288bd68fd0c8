"""Slot-based KV storage: the one part of the step decoder coupled to transformers' cache classes.

Why: ``DynamicCache`` concatenates a new column onto every layer's keys and values at every step,
and cannot drop a row, take back a token or admit a row of another length. ``SlotKV`` holds
``rows x heads x columns x dim`` buffers, preallocated and written in place, and hands the model
a ``transformers.cache_utils.Cache`` whose layers are views into them. Each row has its own
boolean column mask and position counter, so rows of different lengths coexist (new rows are
left-padded, rolled-back tokens become masked holes, dead slots are reused).

Coupling: ``_SlotLayer`` subclasses ``DynamicLayer`` and overrides ``update``,
``lazy_initialization`` and ``get_seq_length``; pyproject pins transformers to the range this
was tested with, and tests/integration/models/test_architecture_parity.py checks it per architecture.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

__all__ = ["SlotKV", "sliding_window_of"]


def sliding_window_of(config) -> int | None:
    """The sliding-attention window if any layer of the model uses one (mistral, phi3, gemma2/3)."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if not window or (types is not None and "sliding_attention" not in types):
        return None
    return int(window)


class _SlotLayer(DynamicLayer):
    """One layer's KV storage: a preallocated buffer; the model's update writes columns in place."""

    def __init__(self, kbuf: torch.Tensor, vbuf: torch.Tensor):
        super().__init__()
        self.kbuf, self.vbuf = kbuf, vbuf
        self.b = 0  # rows in the batch
        self.n = 0  # columns in use
        self.is_initialized = True
        self.device = kbuf.device
        self.refresh()

    def refresh(self) -> None:
        self.keys = self.kbuf[: self.b, :, : self.n]
        self.values = self.vbuf[: self.b, :, : self.n]

    def lazy_initialization(self, key_states, value_states) -> None:  # buffers exist already
        pass

    def update(self, key_states, value_states, *args, **kwargs):
        q = key_states.shape[-2]
        self.kbuf[: self.b, :, self.n: self.n + q] = key_states
        self.vbuf[: self.b, :, self.n: self.n + q] = value_states
        self.n += q
        self.refresh()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.n


class SlotKV:
    """KV buffers for ``capacity`` slots plus each slot's column mask and position counter."""

    def __init__(self, config, *, capacity: int, dtype: torch.dtype, device: torch.device, column_chunk: int = 64):
        self.config = config
        self.capacity, self.dtype, self.device, self.column_chunk = capacity, dtype, device, column_chunk
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self._shape = (heads, head_dim)
        self.layers = [self._new_layer(0) for _ in range(config.num_hidden_layers)]
        self.cache = Cache(layers=self.layers)
        self.mask = torch.zeros(capacity, 0, dtype=torch.bool, device=device)
        self.pos = torch.zeros(capacity, dtype=torch.long, device=device)
        self.window = sliding_window_of(config)
        # shared prefixes (decoding/cascade.py): slot -> group id (-1: none), group id -> prefix KV;
        # a grouped slot holds only its private columns (suffix + generated), positions stay absolute
        self.group = torch.full((capacity,), -1, dtype=torch.long)
        self.shared: dict[int, Any] = {}
        self._next_gid = 0
        self.reallocations = 0  # buffer reallocations (growth) since this buffer was made

    def _new_layer(self, cols: int) -> _SlotLayer:
        h, d = self._shape
        z = lambda: torch.zeros(self.capacity, h, cols, d, dtype=self.dtype, device=self.device)  # noqa: E731
        return _SlotLayer(z(), z())

    @property
    def b(self) -> int:
        return self.layers[0].b

    @property
    def n(self) -> int:
        return self.layers[0].n

    def set_bn(self, b: int, n: int) -> None:
        for layer in self.layers:
            layer.b, layer.n = b, n
            layer.refresh()

    def prefill_cache(self) -> DynamicCache:
        """A plain cache for a prefill forward; its keys are then copied in with :meth:`write_block`.

        Built without the config on purpose: with one, sliding-window layers keep only their last
        ``window`` columns, and the prefix a row needs after a rollback would be gone."""
        return DynamicCache()

    def step_mask(self, b: int, n1: int):
        """The attention mask for a one-column step over columns ``[0, n1)``.

        Without sliding-window layers: the 2-D column mask (transformers builds the causal mask).
        With them, transformers would measure the window in columns, but a row's columns include
        holes (rolled-back tokens) and left padding, so the window is built here from each column's
        position instead: column c of a row is at position (real columns before c), and a sliding
        layer sees key k from query q iff pos(q) - pos(k) < window, as in transformers.
        """
        am = self.mask[:b, :n1]
        if self.window is None:
            return am
        from transformers.masking_utils import create_causal_mask

        kpos = am.long().cumsum(1) - 1
        # one query per row, so the window is a per-(row, column) condition: folded into the 2-D
        # mask, transformers builds the 4-D mask without a vmapped mask function
        keep = am & ((self.pos[:b, None] - kpos) < self.window)
        keep[:, -1] = am[:, -1]  # the query's own column: a dead slot (stale position) still sees its pad
        like = torch.empty(b, 1, 1, dtype=self.dtype, device=self.device)
        # never None (no is_causal skip): mistral/phi3 would then rebuild a column-space window
        sliding = create_causal_mask(self.config, like, keep, self.cache, allow_is_causal_skip=False)
        types = getattr(self.config, "layer_types", None)
        if types is None:  # mistral, phi3: every layer slides, and the model takes one mask
            return sliding
        return {"full_attention": create_causal_mask(self.config, like, am, self.cache),
                "sliding_attention": sliding}

    @property
    def columns(self) -> int:
        """Columns the buffers hold now (``n`` of them in use)."""
        return self.layers[0].kbuf.shape[2]

    @property
    def bytes_per_column(self) -> int:
        """Bytes one more column costs across every layer's keys and values (all ``capacity`` slots)."""
        h, d = self._shape
        return 2 * len(self.layers) * self.capacity * h * d * self.layers[0].kbuf.element_size()

    def reserve(self, columns: int) -> bool:
        """Pre-size the buffers to ``columns`` columns in one allocation.

        Why: growing ``column_chunk`` columns at a time allocates fresh zeroed buffers for every
        layer and copies the old ones each time (about 3% of a Sleight of Word run); a caller that
        knows its longest row (prompt + new tokens) pays one allocation instead. Skipped (False)
        when the buffers would take more than a quarter of the free memory; growth then works as
        before, and a row longer than the reservation still grows the buffers."""
        if columns <= self.columns:
            return True
        from tamperbench.models.memory import free_bytes

        if columns * self.bytes_per_column > free_bytes(self.device) // 4:
            return False
        self._reallocate(columns, 0)
        return True

    def ensure_columns(self, need: int, shift: int = 0) -> None:
        """Make room for ``need`` columns; ``shift`` moves existing columns right (left-pad everyone)."""
        cap = self.columns
        if need <= cap:
            if self.mask.shape[1] < cap:
                self.mask = torch.cat([self.mask, self.mask.new_zeros(self.capacity, cap - self.mask.shape[1])], 1)
            if shift:
                self._shift_in_place(shift)
            return
        self._reallocate(max(need, cap) + self.column_chunk, shift)

    def _shift_in_place(self, shift: int) -> None:
        """Move the first ``b`` slots' columns right by ``shift`` inside buffers that hold them: the
        same values as a reallocation's copy, and zeros in the freed leading columns as there."""
        b, n = self.b, self.n
        for layer in self.layers:
            for buf in (layer.kbuf, layer.vbuf):
                buf[:b, :, shift: shift + n] = buf[:b, :, :n].clone()
                buf[:b, :, :shift] = 0
        self.mask[:b, shift: shift + n] = self.mask[:b, :n].clone()
        self.mask[:b, :shift] = False
        self.set_bn(b, n + shift)

    def _reallocate(self, new_cap: int, shift: int) -> None:
        self.reallocations += 1
        b, n = self.b, self.n
        for layer in self.layers:
            fresh = self._new_layer(new_cap)
            fresh.kbuf[:b, :, shift: shift + n] = layer.kbuf[:b, :, :n]
            fresh.vbuf[:b, :, shift: shift + n] = layer.vbuf[:b, :, :n]
            layer.kbuf, layer.vbuf = fresh.kbuf, fresh.vbuf
        mask = self.mask.new_zeros(self.capacity, new_cap)
        mask[:b, shift: shift + n] = self.mask[:b, :n]
        self.mask = mask
        self.set_bn(b, n + shift)

    def write_block(self, idx: torch.Tensor, kv, colmask: torch.Tensor | None = None) -> None:
        """Write right-aligned KV blocks (per layer (keys, values), columns = width) into slots ``idx``."""
        n = self.n
        width = kv[0][0].shape[-2]
        for layer, (k, v) in zip(self.layers, kv):
            layer.kbuf[idx, :, n - width: n] = k
            layer.vbuf[idx, :, n - width: n] = v
        self.mask[idx] = False
        self.mask[idx, n - width: n] = True if colmask is None else colmask
        self.group[idx.cpu()] = -1

    # ---------------------------------------------------------------- shared prefixes
    def attach(self, prefix) -> int:
        """The group id of ``prefix`` (a cascade.SharedPrefix), registering it on first use."""
        for gid, held in self.shared.items():
            if held is prefix:
                return gid
        gid, self._next_gid = self._next_gid, self._next_gid + 1
        self.shared[gid] = prefix
        return gid

    def groups(self, b: int) -> list[tuple[torch.Tensor, Any]]:
        """(slots, prefix) of every group with a slot among the first ``b``."""
        g = self.group[:b]
        return [((g == gid).nonzero()[:, 0].to(self.device), self.shared[gid])
                for gid in g[g >= 0].unique().tolist()]

    def prune(self, live: list[int]) -> None:
        """Free the prefixes no live slot uses (a group ends with its last row)."""
        used = set(self.group[live].tolist()) if live else set()
        for gid in [gid for gid in self.shared if gid not in used]:
            del self.shared[gid]

    @property
    def groups_registered(self) -> int:
        """Shared prefixes registered since this buffer was made (freed ones included)."""
        return self._next_gid

    @property
    def shared_bytes(self) -> int:
        return sum(p.nbytes for p in self.shared.values())

    def copy_rows(self, src: int, idx: torch.Tensor) -> None:
        """Slot ``src`` into slots ``idx``: one plain strided copy per slot (an indexed assignment
        with a cloned source cost three times as much, and forks happen mid-decode)."""
        n = self.n
        for dst in idx.tolist():
            for layer in self.layers:
                layer.kbuf[dst, :, :n].copy_(layer.kbuf[src, :, :n])
                layer.vbuf[dst, :, :n].copy_(layer.vbuf[src, :, :n])
            self.mask[dst] = self.mask[src]
            self.pos[dst] = self.pos[src]
            self.group[dst] = self.group[src]

    def real_columns(self, s: int) -> torch.Tensor:
        return self.mask[s, : self.n].nonzero()[:, 0]

    def export(self, s: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Slot ``s``'s real columns, per layer (keys, values); a grouped slot's prefix first."""
        cols = self.real_columns(s)
        out = [(layer.kbuf[s][:, cols].clone(), layer.vbuf[s][:, cols].clone()) for layer in self.layers]
        gid = int(self.group[s])
        if gid < 0:
            return out
        return [(torch.cat([pk[0], k], 1), torch.cat([pv[0], v], 1))
                for (pk, pv), (k, v) in zip(self.shared[gid].kv, out)]

    def drop_leading(self, first: int) -> None:
        """Drop the first ``first`` columns of every slot (no live row uses them)."""
        b, n = self.b, self.n
        for layer in self.layers:
            for buf in (layer.kbuf, layer.vbuf):
                buf[:b, :, : n - first] = buf[:b, :, first:n].clone()
        self.mask[:b, : n - first] = self.mask[:b, first:n].clone()
        self.mask[:b, n - first:] = False
        self.set_bn(b, n - first)

    def move_rows(self, srcs: list[int], dsts: list[int], b: int) -> None:
        """Move slots ``srcs`` into slots ``dsts`` (dead ones), then keep only the first ``b`` slots.

        Why not gather the whole batch: compaction then copies only the rows that move (live rows
        beyond ``b`` into the holes below it), not every row's columns, so it is cheap enough to
        run whenever a slot is dead, and no dead row is carried through the forward passes."""
        n = self.n
        for src, dst in zip(srcs, dsts):
            for layer in self.layers:
                layer.kbuf[dst, :, :n].copy_(layer.kbuf[src, :, :n])
                layer.vbuf[dst, :, :n].copy_(layer.vbuf[src, :, :n])
            self.mask[dst] = self.mask[src]
            self.pos[dst] = self.pos[src]
            self.group[dst] = self.group[src]
        self.mask[b:] = False
        self.group[b:] = -1
        self.set_bn(b, n if b else 0)
