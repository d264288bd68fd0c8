"""Batched greedy step decoding that callers can steer token by token (the facade).

Why our own loop instead of ``model.generate``: the suites must force chosen tokens into a row,
look one token ahead and take it back, fork a row to share a prefix, and retire finished rows
while admitting new ones, all while every step reports per-row log-prob, full-vocabulary entropy
and top-k from one float32 ``log_softmax``. ``generate`` offers none of that.

Parts: ``kv_slots.SlotKV`` (KV columns, masks, positions: the transformers-coupled part),
``rows.PendingState`` / ``rows.Row`` (per-row state), ``distributions`` (the statistics),
``packed_linear`` (the forwards' linears over pre-packed oneDNN weights on CPU), ``cascade`` (rows
of a shared prompt prefix hold only their private columns and read the prefix once a step). The
model sees an explicit 2-D attention mask and explicit position ids, exactly the left-padding
scheme ``generate`` uses, so results match it.

Step semantics (one forward per step): each live row holds a *pending* next-token distribution.
``step()`` picks each row's token (its forced token, else the arg-max of the pending
distribution), reports the statistics of that distribution, feeds the token, and stores the new
pending distribution. So after a step ``next_greedy`` of a row is already known: the free
one-token look-ahead the swap engine uses; ``rollback`` of the token just fed restores the
previous pending distribution without another forward.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Mapping, Sequence

import torch

from tamperbench.models.decoding.cascade import cascade_forward, cascade_mode
from tamperbench.models.decoding.distributions import DistStats, distribution, greedy_distribution
from tamperbench.models.decoding.kv_slots import SlotKV
from tamperbench.models.decoding.packed_linear import packed_linears_for
from tamperbench.models.decoding.grammar import choose_under_grammar
from tamperbench.models.decoding.rows import PendingState, Row, RowSnapshot, StepResult
from tamperbench.models.decoding.snapshots import SnapshotRows
from tamperbench.models.protocols import ensure_fits

__all__ = ["RowSnapshot", "StepDecoder", "StepResult"]

_PREFILL_TOKENS = 16384  # tokens per prefill forward; bounds prefill activation memory


class StepDecoder(SnapshotRows):
    """Rows addressed by stable integer ids; see the module docstring for the semantics."""

    def __init__(self, model, *, eos_ids: Sequence[int], topk: int = 20, device=None, capacity: int = 64,
                 column_chunk: int = 64, max_context: int | None = None):
        self.model = model
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.eos_set = set(int(e) for e in eos_ids)
        self.pad_id = int(eos_ids[0])
        self.topk, self.capacity, self.max_context = int(topk), int(capacity), max_context
        self.kv = SlotKV(model.config, capacity=self.capacity, dtype=next(model.parameters()).dtype,
                         device=self.device, column_chunk=column_chunk)
        self.state = PendingState(self.topk, self.device)
        self.slots: list[Row | None] = []  # slot -> row (None = dead slot)
        self.by_id: dict[int, int] = {}  # row id -> slot
        self._next_id = 0
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self.steps = 0
        self.forward_seconds = 0.0
        # oneDNN pre-packed linear weights for this decoder's forwards (CPU float32; see packed_linear.py)
        self.packed = packed_linears_for(model)
        # shared prefixes read once per step (decoding/cascade.py), or copied into every row (None)
        self.shared_prefix_attention, self.cascade_fallback = cascade_mode(model, self.kv.window)
        self.cascade_rows = 0  # rows admitted into a shared-prefix group
        self.cascade_steps = 0
        # False: steps report the token and log-probs only (entropies and top-k NaN, ids -1), for
        # callers that read nothing else (models/generate.py); the tokens are the same either way
        self.per_token_stats = True

    def distribution(self, logits: torch.Tensor) -> tuple[torch.Tensor, DistStats]:
        """The pending distribution of rows whose last logits are ``logits`` (see ``per_token_stats``)."""
        return (distribution if self.per_token_stats else greedy_distribution)(logits, self.topk)

    # ---------------------------------------------------------------- queries
    @property
    def b(self) -> int:
        return len(self.slots)

    @property
    def n(self) -> int:
        return self.kv.n

    @property
    def logp(self) -> torch.Tensor | None:
        return self.state.logp

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

    def pending_logprobs(self, rids: Sequence[int], *, constrained: bool = False) -> torch.Tensor:
        """(len(rids), V) float32 log-probs of each row's next token (e.g. for sampling);
        ``constrained``: tokens a row's grammar forbids are -inf (what to sample from)."""
        logp = self.state.logp[[self.by_id[r] for r in rids]]
        if not constrained:
            return logp
        from tamperbench.models.decoding.grammar import constrain

        return constrain(logp, [self.slots[self.by_id[r]].grammar for r in rids])

    def set_grammar(self, rid: int, grammar) -> None:
        """Decode row ``rid`` under ``grammar`` (a ``grammar.RowGrammar`` from ``grammar.matcher``;
        None lifts it): from its next step on, its greedy token is the arg-max over the tokens the
        grammar allows, a forced token the grammar forbids is refused, and once the grammar is
        complete only EOS is allowed. Tokens the row already generated are consumed first."""
        row = self.slots[self.by_id[rid]]
        if grammar is not None:
            for tok in row.tokens[row.n_prompt:]:
                if not grammar.consume(tok):
                    raise ValueError(f"row {rid}: its generated token {tok} is not allowed by the grammar")
        row.grammar = grammar

    def next_greedy(self, rid: int) -> int:
        return int(self.state.stats.greedy[self.by_id[rid]])

    # ---------------------------------------------------------------- rows in / out
    def reserve_columns(self, columns: int) -> bool:
        """Pre-size the KV buffers for rows of up to ``columns`` columns (prompt + new tokens), one
        allocation instead of one per ``column_chunk``; False where memory is short (see SlotKV.reserve)."""
        return self.kv.reserve(columns)

    @torch.inference_mode()
    def add_rows(self, prompts: Sequence[Sequence[int]], *, reserve: int = 0) -> list[int]:
        """Prefill new rows (left-padded together) and place them in free slots; returns row ids.
        ``reserve``: tokens each row will still generate, checked against the context length."""
        if not prompts:
            return []
        if len(prompts) > self.free_slots:
            raise ValueError(f"{len(prompts)} new rows but only {self.free_slots} free slots")
        if any(len(p) == 0 for p in prompts):
            raise ValueError("a row needs at least one prompt token")
        for i, p in enumerate(prompts):  # all rows first: refuse before any compute
            ensure_fits(len(p), reserve, self.max_context, f"row {i}")
        out: list[int] = []
        per = max(1, _PREFILL_TOKENS // max(len(p) for p in prompts))
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
        dc = self.kv.prefill_cache()
        logits = self._forward(ids, am, pos, dc, logits_to_keep=1)[:, -1]
        slots, idx = self._make_room(L, m)
        self.kv.write_block(idx, [(layer.keys, layer.values) for layer in dc.layers], am)
        self.kv.pos[idx] = am.sum(1)
        self.state.write(idx, *self.distribution(logits))
        return self._place(slots, [Row(-1, list(p), len(p)) for p in prompts])

    def _place(self, slots: list[int], rows: list[Row]) -> list[int]:
        out = []
        for s, proto in zip(slots, rows):
            rid, self._next_id = self._next_id, self._next_id + 1
            self.slots[s] = proto.copy(rid)
            self.by_id[rid] = s
            out.append(rid)
        return out

    def _make_room(self, width: int, m: int) -> tuple[list[int], torch.Tensor]:
        """Grow the buffers so ``width`` right-aligned columns fit, then claim ``m`` slots
        (dead slots first, then grow the batch). Shared by prefill, fork and snapshot import."""
        self.kv.ensure_columns(max(width, self.n), shift=max(0, width - self.n))
        dead = [i for i, r in enumerate(self.slots) if r is None][:m]
        grow = m - len(dead)
        if grow:
            b = self.b
            self.slots.extend([None] * grow)
            self.kv.set_bn(b + grow, self.n)
            vocab = self.model.config.vocab_size if self.state.logp is None else self.state.logp.shape[1]
            self.state.grow(grow, vocab)
            dead.extend(range(b, b + grow))
        return dead, torch.tensor(dead, device=self.device)

    @torch.inference_mode()
    def release(self, rids: Sequence[int]) -> None:
        """Retire rows: their slots become free for new rows or forks."""
        for rid in rids:
            s = self.by_id.pop(rid)
            self.slots[s] = None
            self.kv.mask[s] = False
            self.kv.group[s] = -1
        if self.kv.shared:
            self.kv.prune([s for s, r in enumerate(self.slots) if r is not None])

    @torch.inference_mode()
    def fork(self, rid: int, copies: int) -> list[int]:
        """Duplicate a row (cache, mask, pending distribution) into ``copies`` new rows."""
        if copies > self.free_slots:
            raise ValueError(f"fork of {copies} rows but only {self.free_slots} free slots")
        src = self.by_id[rid]
        row = self.slots[src]
        assert row is not None
        slots, idx = self._make_room(0, copies)
        self.kv.copy_rows(src, idx)
        self.state.copy(src, idx)
        return self._place(slots, [row] * copies)

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
        cols = self.kv.real_columns(s)
        if row.grammar is not None:
            row.grammar.rollback(n_tokens)
        if n_tokens == 1 and row.can_rollback and row.refeed is None:
            self.kv.mask[s, cols[-1]] = False
            self.kv.pos[s] -= 1
            row.tokens.pop()
            self.state.restore(s)
            row.can_rollback = False
            return
        new_len = len(row.tokens) - n_tokens
        in_cache = len(row.tokens) - (1 if row.refeed is not None else 0)
        n_drop = in_cache - (new_len - 1)  # keep tokens[:new_len-1] cached; re-feed tokens[new_len-1]
        self.kv.mask[s, cols[len(cols) - n_drop:]] = False
        self.kv.pos[s] -= n_drop
        del row.tokens[new_len:]
        row.refeed = row.tokens[-1]
        row.can_rollback = False

    # ---------------------------------------------------------------- the step
    def _forward(self, ids, am, pos, cache, logits_to_keep=1, **extra):
        t0 = time.perf_counter()
        # one token alone is faster through MKL (measured 0.92x packed at 1 row, 1.4-1.7x at 2-8 rows)
        packed = self.packed.active() if self.packed is not None and ids.numel() >= 2 else contextlib.nullcontext()
        with packed:
            out = self.model(input_ids=ids, attention_mask=am, position_ids=pos, use_cache=True,
                             logits_to_keep=logits_to_keep, **{self._cache_kw: cache}, **extra)
        self.forward_seconds += time.perf_counter() - t0
        return out.logits

    def _choose(self, force: Mapping[int, int]) -> tuple[torch.Tensor, set[int], set[int]]:
        """Each slot's token this step: forced, else re-fed after a rollback, else greedy."""
        chosen = self.state.stats.greedy.clone()
        forced, refeed = set(), set()
        for rid, tok in force.items():
            s = self.by_id[rid]
            g = self.slots[s].grammar
            if g is not None and not g.allows(int(tok)):
                raise ValueError(f"row {rid}: forced token {int(tok)} is not allowed by its grammar")
            chosen[s] = int(tok)
            forced.add(s)
        for s, r in enumerate(self.slots):
            if r is not None and r.refeed is not None:
                if r.rid in force:
                    raise ValueError(f"row {r.rid} is re-feeding after a rollback; force it next step")
                chosen[s] = r.refeed
                refeed.add(s)
        choose_under_grammar(self.slots, self.state.logp, chosen, forced | refeed)
        live = torch.tensor([r is not None for r in self.slots], device=self.device)
        return torch.where(live, chosen, torch.full_like(chosen, self.pad_id)), forced, refeed

    @torch.inference_mode()
    def step(self, force: Mapping[int, int] | None = None) -> list[StepResult]:
        """Emit and feed one token for every live row (forced where given); returns results in slot order."""
        force = force or {}
        self._compact_if_sparse()
        b = self.b
        if b == 0 or self.free_slots == self.capacity:
            return []
        chosen, forced, refeed = self._choose(force)
        st = self.state.stats
        lp = self.state.logp.gather(1, chosen[:, None])[:, 0]
        tok_l, lp_l, ent_l, entk_l, tlp_l, tid_l = (t.tolist() for t in (chosen, lp, st.entropy, st.entropy_topk,
                                                                         st.topk_logprobs, st.topk_ids))
        self._trim_leading()
        n = self.n
        self.kv.ensure_columns(n + 1)
        self.kv.mask[:b, n] = True  # dead rows attend to their own pad column only: finite, ignored
        live = torch.tensor([r is not None for r in self.slots], device=self.device)
        groups = self.kv.groups(b) if self.kv.shared else []
        if groups:  # rows of a shared prefix read it once (decoding/cascade.py)
            logits = cascade_forward(self, chosen[:, None], self.kv.step_mask(b, n + 1),
                                     self.kv.pos[:b, None].clone(), groups)[:, -1]
            self.cascade_steps += 1
        else:
            logits = self._forward(chosen[:, None], self.kv.step_mask(b, n + 1), self.kv.pos[:b, None].clone(),
                                   self.kv.cache)[:, -1]
        self.kv.pos[:b] += live.long()
        self.state.push(*self.distribution(logits))
        greedy = self.state.stats.greedy.tolist()
        self.steps += 1
        results = []
        for s, r in enumerate(self.slots):
            if r is None:
                continue
            tok = tok_l[s]
            if s in refeed:  # already in r.tokens; now it is in the cache too
                r.refeed, r.can_rollback = None, False
                continue
            r.tokens.append(tok)
            r.can_rollback = True
            if r.grammar is not None:
                r.grammar.consume(tok)
            results.append(StepResult(r.rid, tok, lp_l[s], ent_l[s], entk_l[s], tid_l[s], tlp_l[s],
                                      s in forced, tok in self.eos_set, greedy[s],
                                      None if r.grammar is None else r.grammar.done))
        return results

    # ---------------------------------------------------------------- housekeeping
    def _trim_leading(self, force: bool = False) -> None:
        """Drop leading columns no live row uses (rows admitted later are left-padded); one copy
        now and then keeps the column count near the longest live row instead of growing forever.
        ``force``: check now (after a compaction), not only every 16th step."""
        n = self.n
        if n < 64 or (self.steps % 16 and not force):
            return
        live = [i for i, r in enumerate(self.slots) if r is not None]
        if not live:
            return
        used = self.kv.mask[live, :n].any(0).nonzero()
        first = int(used[0, 0]) if len(used) else n
        if first >= max(32, n // 4):
            self.kv.drop_leading(first)

    def _compact_if_sparse(self) -> None:
        # a dead slot costs a whole row of every forward; moving a live row into it costs one
        # row's KV copy, less than one step of carrying it (see SlotKV.move_rows)
        if any(r is None for r in self.slots):
            self.compact()

    @torch.inference_mode()
    def compact(self) -> None:
        """Drop dead slots: live rows from the tail move into the holes (rows keep their ids)."""
        live = [i for i, r in enumerate(self.slots) if r is not None]
        m = len(live)
        holes = [i for i in range(m) if self.slots[i] is None]
        movers = live[m - len(holes):] if holes else []
        self.kv.move_rows(movers, holes, m)
        if m:
            order = list(range(m))
            for src, dst in zip(movers, holes):
                order[dst] = src
            self.state.select(torch.tensor(order, device=self.device, dtype=torch.long))
        else:
            self.state.reset()
        for src, dst in zip(movers, holes):
            self.slots[dst] = self.slots[src]
        self.slots = self.slots[:m]
        self.by_id = {r.rid: s for s, r in enumerate(self.slots)}
        if m:
            self._trim_leading(force=True)
