"""Batched greedy step decoding over a slot-based KV cache that callers can steer token by token.

Why our own loop instead of ``model.generate``: the suites must force chosen tokens into a row,
look one token ahead and take it back, fork a row to share a prefix, and retire finished rows
while admitting new ones, all while every step reports per-row log-prob, full-vocabulary entropy
and top-k from one float32 ``log_softmax``. ``generate`` offers none of that.

Layout. The cache holds ``rows x heads x columns x dim`` buffers, preallocated and written in
place (no per-step concatenation). Every step appends one column for all rows; each row has its
own boolean column mask and its own position counter, so rows of different lengths coexist: new
rows are left-padded to the current end, rolled-back tokens become masked holes, finished rows are
"dead" slots that later rows reuse. The model sees an explicit 2-D attention mask and explicit
position ids, which is exactly the left-padding scheme ``generate`` uses, so results match it.

Step semantics (one forward per step): each live row holds a *pending* next-token distribution.
``step()`` picks each row's token (its forced token, else the arg-max of the pending
distribution), reports the statistics of that distribution, feeds the token, and stores the new
pending distribution. So after a step ``next_greedy`` of a row is already known: that is the
free one-token look-ahead the swap engine uses, and ``rollback`` of the token just fed restores
the previous pending distribution without another forward.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

__all__ = ["RowSnapshot", "StepDecoder", "StepResult"]

_PREFILL_TOKENS = 16384  # tokens per prefill forward; bounds prefill activation memory


class _SlotLayer(DynamicLayer):
    """One layer's KV storage: a preallocated buffer; the model's update writes one column in place."""

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


@dataclass
class StepResult:
    """What one row did in one step. ``logprob``/``entropy``/``topk_*`` describe the distribution
    the token was chosen from (for a forced token: how likely the model found it)."""

    row: int
    token: int  # the token emitted (and fed) this step
    logprob: float
    entropy: float  # full-vocabulary entropy, nats
    entropy_topk: float  # entropy of the top-k renormalised, nats (the paper's estimate)
    topk_ids: list[int]
    topk_logprobs: list[float]
    forced: bool
    is_eos: bool
    next_greedy: int  # arg-max of the new pending distribution: the free look-ahead


@dataclass
class RowSnapshot:
    """A row copied out of the decoder (see ``StepDecoder.export_row``)."""

    kv: list  # per layer (keys, values), each heads x real columns x dim
    tokens: list[int]
    n_prompt: int
    can_rollback: bool
    refeed: int | None
    logp: torch.Tensor
    prev_logp: torch.Tensor
    stats: tuple
    prev_stats: tuple
    pos: int


@dataclass
class _Row:
    rid: int
    tokens: list[int]  # the row's context (prompt + emitted); all cached except a pending ``refeed``
    n_prompt: int
    can_rollback: bool = False  # the previous pending distribution is still held for this row
    refeed: int | None = None  # token to re-feed (after a multi-token rollback) before emitting
    extra: dict = field(default_factory=dict)


class StepDecoder:
    """Rows addressed by stable integer ids; see the module docstring for the semantics."""

    def __init__(self, model, *, eos_ids: Sequence[int], topk: int = 20, device=None, capacity: int = 64,
                 column_chunk: int = 64, max_context: int | None = None):
        self.model = model
        self.max_context = max_context
        cfg = model.config
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.eos = torch.tensor(sorted(set(int(e) for e in eos_ids)), device=self.device)
        self.eos_set = set(int(e) for e in eos_ids)
        self.pad_id = int(eos_ids[0])
        self.topk = int(topk)
        self.capacity = int(capacity)
        self.column_chunk = column_chunk
        n_layers = cfg.num_hidden_layers
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self._kv_shape = (heads, head_dim)
        self._dtype = next(model.parameters()).dtype
        self._layers = [self._new_layer(0) for _ in range(n_layers)]
        self.cache = Cache(layers=self._layers)
        self.mask = torch.zeros(self.capacity, 0, dtype=torch.bool, device=self.device)
        self.pos = torch.zeros(self.capacity, dtype=torch.long, device=self.device)
        self.slots: list[_Row | None] = []  # slot -> row (None = dead slot)
        self.by_id: dict[int, int] = {}  # row id -> slot
        self._next_id = 0
        self.logp: torch.Tensor | None = None  # (b, V) pending log-probs, float32
        self.prev_logp: torch.Tensor | None = None
        self._stats = None  # (entropy, entropy_topk, topk_lp, topk_ids, greedy) of logp
        self._prev_stats = None
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self.steps = 0
        self.forward_seconds = 0.0

    # ---------------------------------------------------------------- buffers
    def _new_layer(self, cols: int) -> _SlotLayer:
        h, d = self._kv_shape
        z = lambda: torch.zeros(self.capacity, h, cols, d, dtype=self._dtype, device=self.device)  # noqa: E731
        return _SlotLayer(z(), z())

    @property
    def b(self) -> int:
        return len(self.slots)

    @property
    def n(self) -> int:
        return self._layers[0].n

    def _set_bn(self, b: int, n: int) -> None:
        for layer in self._layers:
            layer.b, layer.n = b, n
            layer.refresh()

    def _ensure_columns(self, need: int, shift: int = 0) -> None:
        """Make room for ``need`` columns; ``shift`` moves existing columns right (left-pad everyone)."""
        cap = self._layers[0].kbuf.shape[2]
        if need <= cap and shift == 0:
            if self.mask.shape[1] < cap:
                self.mask = torch.cat([self.mask, self.mask.new_zeros(self.capacity, cap - self.mask.shape[1])], 1)
            return
        new_cap = max(need, cap) + self.column_chunk
        b, n = self.b, self.n
        for layer in self._layers:
            fresh = self._new_layer(new_cap)
            fresh.kbuf[:b, :, shift: shift + n] = layer.kbuf[:b, :, :n]
            fresh.vbuf[:b, :, shift: shift + n] = layer.vbuf[:b, :, :n]
            layer.kbuf, layer.vbuf = fresh.kbuf, fresh.vbuf
        mask = self.mask.new_zeros(self.capacity, new_cap)
        mask[:b, shift: shift + n] = self.mask[:b, :n]
        self.mask = mask
        self._set_bn(b, n + shift)

    # ---------------------------------------------------------------- queries
    def live_rows(self) -> list[int]:
        return [r.rid for r in self.slots if r is not None]

    @property
    def free_slots(self) -> int:
        return self.capacity - sum(r is not None for r in self.slots)

    def tokens(self, rid: int) -> list[int]:
        """All real tokens of the row (prompt + generated)."""
        return list(self.slots[self.by_id[rid]].tokens)

    def generated(self, rid: int) -> list[int]:
        r = self.slots[self.by_id[rid]]
        return r.tokens[r.n_prompt:]

    def pending_logprobs(self, rids: Sequence[int]) -> torch.Tensor:
        """(len(rids), V) float32 log-probs of each row's next token (e.g. for sampling)."""
        return self.logp[[self.by_id[r] for r in rids]]

    def next_greedy(self, rid: int) -> int:
        return int(self._stats[4][self.by_id[rid]])

    # ---------------------------------------------------------------- rows in / out
    @torch.inference_mode()
    def add_rows(self, prompts: Sequence[Sequence[int]]) -> list[int]:
        """Prefill new rows (left-padded together) and place them in free slots; returns row ids."""
        if not prompts:
            return []
        if len(prompts) > self.free_slots:
            raise ValueError(f"{len(prompts)} new rows but only {self.free_slots} free slots")
        if any(len(p) == 0 for p in prompts):
            raise ValueError("a row needs at least one prompt token")
        from tamperbench.models.protocols import ensure_fits

        for i, p in enumerate(prompts):  # all rows first: refuse before any compute
            ensure_fits(len(p), 0, self.max_context, f"row {i}")
        out: list[int] = []
        longest = max(len(p) for p in prompts)
        per = max(1, _PREFILL_TOKENS // longest)
        for i in range(0, len(prompts), per):
            out.extend(self._add_chunk([list(p) for p in prompts[i: i + per]]))
        return out

    def _add_chunk(self, prompts: list[list[int]]) -> list[int]:
        m, L = len(prompts), max(len(p) for p in prompts)
        ids = torch.full((m, L), self.pad_id, dtype=torch.long, device=self.device)
        am = torch.zeros(m, L, dtype=torch.bool, device=self.device)
        for i, p in enumerate(prompts):
            ids[i, L - len(p):] = torch.tensor(p, device=self.device)
            am[i, L - len(p):] = True
        pos = (am.long().cumsum(1) - 1).clamp(min=0)
        dc = DynamicCache(config=self.model.config)
        logits = self._forward(ids, am, pos, dc, logits_to_keep=1)[:, -1]
        slots, n, idx = self._make_room(L, m)
        for layer, src in zip(self._layers, dc.layers):
            layer.kbuf[idx, :, n - L: n] = src.keys
            layer.vbuf[idx, :, n - L: n] = src.values
        self.mask[idx] = False
        self.mask[idx, n - L: n] = am
        self.pos[idx] = am.sum(1)
        logp, stats = self._distribution(logits)
        self._write_rows(idx, logp, stats)
        rids = []
        for s, p in zip(slots, prompts):
            rid = self._new_id()
            self.slots[s] = _Row(rid, list(p), len(p))
            self.by_id[rid] = s
            rids.append(rid)
        return rids

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _make_room(self, width: int, m: int) -> tuple[list[int], int, torch.Tensor]:
        """Grow the buffers so ``width`` right-aligned columns fit, then claim ``m`` slots.

        Shared by prefill and snapshot import, which both write a right-aligned block of KV.
        """
        self._ensure_columns(max(width, self.n), shift=max(0, width - self.n))
        slots = self._claim_slots(m)
        return slots, self.n, torch.tensor(slots, device=self.device)

    def _claim_slots(self, m: int) -> list[int]:
        """Reuse dead slots first, then grow the batch; state tensors grow with it."""
        dead = [i for i, r in enumerate(self.slots) if r is None][:m]
        grow = m - len(dead)
        if grow:
            b = self.b
            self.slots.extend([None] * grow)
            self._set_bn(b + grow, self.n)
            V = self.model.config.vocab_size if self.logp is None else self.logp.shape[1]
            if self.logp is None:
                self.logp = torch.zeros(0, V, device=self.device)
                self.prev_logp = self.logp.clone()
                k = self.topk
                empty = (torch.zeros(0, device=self.device), torch.zeros(0, device=self.device),
                         torch.zeros(0, k, device=self.device), torch.zeros(0, k, dtype=torch.long, device=self.device),
                         torch.zeros(0, dtype=torch.long, device=self.device))
                self._stats, self._prev_stats = empty, tuple(t.clone() for t in empty)
            pad = lambda t: torch.cat([t, t.new_zeros((grow, *t.shape[1:]))])  # noqa: E731
            self.logp, self.prev_logp = pad(self.logp), pad(self.prev_logp)
            self._stats = tuple(pad(t) for t in self._stats)
            self._prev_stats = tuple(pad(t) for t in self._prev_stats)
            dead.extend(range(b, b + grow))
        return dead

    def _write_rows(self, idx, logp, stats) -> None:
        self.logp[idx] = logp
        for dst, src in zip(self._stats, stats):
            dst[idx] = src

    @torch.inference_mode()
    def release(self, rids: Sequence[int]) -> None:
        """Retire rows: their slots become free for new rows or forks."""
        for rid in rids:
            s = self.by_id.pop(rid)
            self.slots[s] = None
            self.mask[s] = False

    @torch.inference_mode()
    def fork(self, rid: int, copies: int) -> list[int]:
        """Duplicate a row (cache, mask, pending distribution) into ``copies`` new rows."""
        if copies > self.free_slots:
            raise ValueError(f"fork of {copies} rows but only {self.free_slots} free slots")
        src = self.by_id[rid]
        row = self.slots[src]
        slots = self._claim_slots(copies)
        n = self.n
        idx = torch.tensor(slots, device=self.device)
        for layer in self._layers:
            layer.kbuf[idx, :, :n] = layer.kbuf[src, :, :n].clone()
            layer.vbuf[idx, :, :n] = layer.vbuf[src, :, :n].clone()
        for t in (self.mask, self.pos, self.logp, self.prev_logp, *self._stats, *self._prev_stats):
            t[idx] = t[src].clone()
        out = []
        for s in slots:
            nid = self._new_id()
            self.slots[s] = _Row(nid, list(row.tokens), row.n_prompt, row.can_rollback, row.refeed, dict(row.extra))
            self.by_id[nid] = s
            out.append(nid)
        return out

    @torch.inference_mode()
    def rollback(self, rid: int, n_tokens: int = 1) -> None:
        """Take back the last ``n_tokens`` generated tokens of a row.

        One token right after a step restores the held previous distribution (no forward). Deeper
        rollbacks drop one more token and mark it to be re-fed silently in the next step, which
        recomputes the distribution; that step then emits nothing for this row.
        """
        s = self.by_id[rid]
        row = self.slots[s]
        if n_tokens < 1 or n_tokens > len(row.tokens) - row.n_prompt:
            raise ValueError(f"cannot roll back {n_tokens} tokens of row {rid}")
        cols = self.mask[s, : self.n].nonzero()[:, 0]
        if n_tokens == 1 and row.can_rollback and row.refeed is None:
            self.mask[s, cols[-1]] = False
            self.pos[s] -= 1
            row.tokens.pop()
            self.logp[s] = self.prev_logp[s]
            for dst, src in zip(self._stats, self._prev_stats):
                dst[s] = src[s]
            row.can_rollback = False
            return
        new_len = len(row.tokens) - n_tokens
        in_cache = len(row.tokens) - (1 if row.refeed is not None else 0)
        n_drop = in_cache - (new_len - 1)  # keep tokens[:new_len-1] cached; re-feed tokens[new_len-1]
        self.mask[s, cols[len(cols) - n_drop:]] = False
        self.pos[s] -= n_drop
        del row.tokens[new_len:]
        row.refeed = row.tokens[-1]
        row.can_rollback = False

    # ---------------------------------------------------------------- the step
    def _forward(self, ids, am, pos, cache, logits_to_keep=1):
        t0 = _now()
        out = self.model(input_ids=ids, attention_mask=am, position_ids=pos, use_cache=True,
                         logits_to_keep=logits_to_keep, **{self._cache_kw: cache})
        self.forward_seconds += _now() - t0
        return out.logits

    def _distribution(self, logits: torch.Tensor):
        """float32 log_softmax plus entropy, top-k entropy, top-k and arg-max, all batched."""
        logp = torch.log_softmax(logits.float(), dim=-1)
        p = logp.exp()
        ent = -(torch.where(p > 0, p * logp, torch.zeros((), device=p.device))).sum(-1)
        tlp, tid = logp.topk(self.topk, dim=-1)
        rn = tlp - torch.logsumexp(tlp, dim=-1, keepdim=True)
        ent_k = -(rn.exp() * rn).sum(-1)
        greedy = logp.argmax(-1)
        return logp, (ent, ent_k, tlp, tid, greedy)

    @torch.inference_mode()
    def step(self, force: Mapping[int, int] | None = None) -> list[StepResult]:
        """Emit and feed one token for every live row (forced where given); returns results in slot order."""
        force = force or {}
        self._compact_if_sparse()
        b = self.b
        if b == 0 or self.free_slots == self.capacity:
            return []
        live = torch.tensor([r is not None for r in self.slots], device=self.device)
        chosen = self._stats[4].clone()
        forced_slots = []
        refeed_slots = []
        for rid, tok in force.items():
            s = self.by_id[rid]
            chosen[s] = int(tok)
            forced_slots.append(s)
        for s, r in enumerate(self.slots):
            if r is not None and r.refeed is not None:
                if r.rid in force:
                    raise ValueError(f"row {r.rid} is re-feeding after a rollback; force it next step")
                chosen[s] = r.refeed
                refeed_slots.append(s)
        chosen = torch.where(live, chosen, torch.full_like(chosen, self.pad_id))
        lp = self.logp.gather(1, chosen[:, None])[:, 0]
        report = (chosen, lp, *self._stats[:4])
        report = [t.tolist() for t in report]
        self._trim_leading()
        n = self.n
        self._ensure_columns(n + 1)
        self.mask[:b, n] = True  # dead rows attend to their own pad column only: finite, ignored
        ids = chosen[:, None]
        pos = self.pos[:b, None].clone()
        logits = self._forward(ids, self.mask[:b, : n + 1], pos, self.cache)[:, -1]
        self.pos[:b] += live.long()
        self.prev_logp, self._prev_stats = self.logp, self._stats
        self.logp, self._stats = self._distribution(logits)
        greedy = self._stats[4].tolist()
        self.steps += 1
        forced_set, refeed_set = set(forced_slots), set(refeed_slots)
        results = []
        tok_l, lp_l, ent_l, entk_l, tlp_l, tid_l = report
        for s, r in enumerate(self.slots):
            if r is None:
                continue
            tok = tok_l[s]
            if s in refeed_set:  # already in r.tokens; now it is in the cache too
                r.refeed = None
                r.can_rollback = False
                continue
            r.tokens.append(tok)
            r.can_rollback = True
            results.append(StepResult(r.rid, tok, lp_l[s], ent_l[s], entk_l[s], tid_l[s], tlp_l[s],
                                      s in forced_set, tok in self.eos_set, greedy[s]))
        return results

    # ---------------------------------------------------------------- snapshots
    @torch.inference_mode()
    def export_row(self, rid: int) -> "RowSnapshot":
        """Copy one row out of the batch (its real columns only), to re-admit later as any
        number of rows with :meth:`import_rows`: how a shared prefix waits for free slots."""
        s = self.by_id[rid]
        row = self.slots[s]
        cols = self.mask[s, : self.n].nonzero()[:, 0]
        kv = [(layer.kbuf[s][:, cols].clone(), layer.vbuf[s][:, cols].clone()) for layer in self._layers]
        return RowSnapshot(kv, list(row.tokens), row.n_prompt, row.can_rollback, row.refeed,
                           self.logp[s].clone(), self.prev_logp[s].clone(),
                           tuple(t[s].clone() for t in self._stats), tuple(t[s].clone() for t in self._prev_stats),
                           int(self.pos[s]))

    @torch.inference_mode()
    def import_rows(self, snap: "RowSnapshot", copies: int = 1) -> list[int]:
        if copies > self.free_slots:
            raise ValueError(f"{copies} rows but only {self.free_slots} free slots")
        c = snap.kv[0][0].shape[1]
        slots, n, idx = self._make_room(c, copies)
        for layer, (k, v) in zip(self._layers, snap.kv):
            layer.kbuf[idx, :, n - c: n] = k
            layer.vbuf[idx, :, n - c: n] = v
        self.mask[idx] = False
        self.mask[idx, n - c: n] = True
        self.pos[idx] = snap.pos
        self.logp[idx] = snap.logp
        self.prev_logp[idx] = snap.prev_logp
        for dst, src in zip((*self._stats, *self._prev_stats), (*snap.stats, *snap.prev_stats)):
            dst[idx] = src
        out = []
        for s in slots:
            rid = self._new_id()
            self.slots[s] = _Row(rid, list(snap.tokens), snap.n_prompt, snap.can_rollback, snap.refeed)
            self.by_id[rid] = s
            out.append(rid)
        return out

    # ---------------------------------------------------------------- housekeeping
    def _trim_leading(self) -> None:
        """Drop leading columns no live row uses (rows admitted later are left-padded); one copy
        now and then keeps the column count near the longest live row instead of growing forever."""
        n = self.n
        if n < 64 or self.steps % 16:
            return
        live = [i for i, r in enumerate(self.slots) if r is not None]
        if not live:
            return
        used = self.mask[live, :n].any(0).nonzero()
        first = int(used[0, 0]) if len(used) else n
        if first < max(32, n // 4):
            return
        b = self.b
        for layer in self._layers:
            for buf in (layer.kbuf, layer.vbuf):
                buf[:b, :, : n - first] = buf[:b, :, first:n].clone()
        self.mask[:b, : n - first] = self.mask[:b, first:n].clone()
        self.mask[:b, n - first:] = False
        self._set_bn(b, n - first)

    def _compact_if_sparse(self) -> None:
        dead = sum(r is None for r in self.slots)
        if dead and (dead * 4 >= self.b or dead == self.b):
            self.compact()

    @torch.inference_mode()
    def compact(self) -> None:
        """Drop dead slots and columns no live row uses (one copy, not per step)."""
        keep = [i for i, r in enumerate(self.slots) if r is not None]
        b, n = len(keep), self.n
        if b == 0:
            self.slots, self.by_id = [], {}
            self.logp = self.prev_logp = None
            self._set_bn(0, 0)
            return
        idx = torch.tensor(keep, device=self.device)
        cols = self.mask[idx, :n].any(0).nonzero()[:, 0]
        for layer in self._layers:
            for buf in (layer.kbuf, layer.vbuf):
                buf[:b, :, : len(cols)] = buf[:, :, :n].index_select(0, idx).index_select(2, cols)
        mask = self.mask[idx][:, cols]
        self.mask[:] = False
        self.mask[:b, : len(cols)] = mask
        self.pos[:b] = self.pos[idx].clone()
        self.logp, self.prev_logp = self.logp[idx], self.prev_logp[idx]
        self._stats = tuple(t[idx] for t in self._stats)
        self._prev_stats = tuple(t[idx] for t in self._prev_stats)
        self.slots = [self.slots[i] for i in keep]
        self.by_id = {r.rid: s for s, r in enumerate(self.slots)}
        self._set_bn(b, len(cols))


def _now() -> float:
    import time

    return time.perf_counter()
