"""Rows of different lengths in one batch over a DynamicCache, each row under its own row-targeted
intervention, finished rows compacted away: how the batched engine (``batched.py``) runs the
conditions of an item together.

Why not the shared step decoder (``models/decoding``): OWMI feeds *blocks* of several tokens into
rows that already hold a cache -- the task prompt after a forked shared prefix, each condition's
later user turn after its own task output, a probe after a cropped prefix -- while the step
decoder admits a row only as a fresh left-padded prefill and then feeds one token per row per
forward (a 40-token later turn would cost 40 forwards instead of one). And an intervention's
declared positions are absolute positions of its row: here every block is right-aligned, so
column j of row r's block is at position ``pos[r] - (W - len_r) + j`` and each row's hook gets its
own offset (:meth:`Rows.extend`), a bookkeeping the decoder's slots do not expose.

Layout: ``mask`` (rows x columns) marks each row's real columns; left padding inside a block and
the *holes* of a row that finished before the others (``greedy(keep=True)``, task generation)
are masked columns. Explicit ``position_ids`` count real tokens only, so a row sees exactly the
positions and keys it would see alone; batch-1 and batch-R results then differ only by float
rounding of the batched kernels (the engine-equivalence test bounds it). Pad columns map to
positions before the row's current one: they can only be hit by a declared position the row has
already passed, which the engine never feeds as a block (the fork is at the first declared
position); even then a pad column is masked, so no row's output changes.

One-token steps (greedy decoding, the bulk of the forwards) run the linears over the shared step
decoder's pre-packed oneDNN weights (``models/decoding/packed_linear.py``, CPU float32 only): the
same float32 rounding order of change as another batch size, checked by the same equivalence
test; prefills and teacher-forced blocks run the plain modules.

Sliding-window attention is measured by transformers in columns, not positions, so the engine
uses this only for models without a sliding window (``supported``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from tamperbench.owmi.engine.operators import Intervention, Phase


def supported(model) -> bool:
    from tamperbench.models.decoding.kv_slots import sliding_window_of

    return sliding_window_of(model.config) is None


def _select(cache, idx: torch.Tensor):
    """A new cache holding rows ``idx`` (repeats allowed) of ``cache``; ``cache`` is left intact."""
    from transformers import DynamicCache

    if not cache.get_seq_length():
        return DynamicCache()
    return DynamicCache(ddp_cache_data=[(layer.keys[idx], layer.values[idx]) for layer in cache.layers])


class Rows:
    """A batch of rows addressed by stable ids (any hashables), each with its own length."""

    def __init__(self, model, cache, mask: torch.Tensor, rids: Sequence, store=None):
        from tamperbench.owmi.engine.forward import _cache_kw

        self.model, self.cache, self.mask = model, cache, mask
        self.rids = list(rids)
        self.pos = mask.sum(1).long()  # next absolute position of each row = its real tokens so far
        self.ivs: list[tuple[object, Intervention]] = []
        self.dev = next(model.parameters()).device
        self._kw = _cache_kw(model)
        self.forwards = 0
        # bottom groups (``bottom.py``): rows of one label hold the same tokens at the same columns, so the
        # same keys/values below the hooked layer; a new batch's rows are all distinct until told otherwise
        self.bottom: list[int] = list(range(len(self.rids)))
        # each row's real tokens (what keys its lower layers in ``store``, a ``lower.LowerStore``; None: none kept)
        # and the lowest layer a hook of the row has run at (its cache below that layer is the model's own)
        self.store = store
        self.hist: list[tuple[int, ...]] = [()] * len(self.rids)
        self.low: list[int] = [1 << 30] * len(self.rids)
        from tamperbench.models.decoding.packed_linear import packed_linears_for

        self._packed = packed_linears_for(model)

    @classmethod
    def fork(cls, model, prefix_cache, rids: Sequence, ids: Sequence[int] = (), store=None) -> Rows:
        """``len(rids)`` copies of a one-row prefix cache (the shared, unhooked tokens ``ids``)."""
        n = prefix_cache.get_seq_length() if prefix_cache is not None else 0
        cache = _select(prefix_cache, torch.zeros(len(rids), dtype=torch.long)) if n else _select_empty()
        rows = cls(model, cache, torch.ones(len(rids), n, dtype=torch.bool), rids, store)
        rows.bottom = [0] * len(rids)  # copies of one prefix
        if store is not None and len(ids) != n:
            raise ValueError(f"prefix of {len(ids)} tokens for a cache of {n} columns")
        rows.hist = [tuple(ids)] * len(rids)
        return rows

    def _take(self, rows: Rows, order: Sequence[int]) -> Rows:
        """``rows`` given the bookkeeping of this batch's rows ``order``."""
        rows.bottom = [self.bottom[i] for i in order]
        rows.hist = [self.hist[i] for i in order]
        rows.low = [self.low[i] for i in order]
        return rows

    def select(self, order: Sequence[int], rids: Sequence) -> Rows:
        """A copy made of rows ``order`` (batch indices, repeats allowed) under new ids; this batch is
        left intact, so one task cache serves every probe family."""
        idx = torch.tensor(list(order), dtype=torch.long)
        return self._take(Rows(self.model, _select(self.cache, idx), self.mask[idx].clone(), rids, self.store), order)

    def attach(self, rid, iv: Intervention | None) -> None:
        """Hook ``iv`` on row ``rid`` only; it follows the row when finished rows are compacted away."""
        if iv is None:
            return
        iv.rows = lambda: [self.rids.index(rid)] if rid in self.rids else []
        self.ivs.append((rid, iv))

    def _hooks(self):
        from contextlib import nullcontext

        from tamperbench.models.hooks import hooks

        for rid, iv in self.ivs:  # (re-)targeted to this batch: a part (``_part``) shares its parent's hooks
            iv.rows = lambda rid=rid: [self.rids.index(rid)] if rid in self.rids else []
        pairs = [p for _, iv in self.ivs for p in iv.hook_pairs()]
        return hooks(self.model, pairs) if pairs else nullcontext()

    @torch.inference_mode()
    def extend(self, blocks: Sequence[Sequence[int]], phase: Phase, keep: int = 1) -> torch.Tensor:
        """Feed one block of tokens per row (right-aligned; an empty block is a hole) in one forward;
        returns float32 logits of each row's last ``keep`` columns, (rows, keep, V) -- only rows
        with a non-empty block have meaningful logits."""
        b = len(self.rids)
        assert len(blocks) == b, (len(blocks), b)
        w = max(len(x) for x in blocks)
        lens = torch.tensor([len(x) for x in blocks], dtype=torch.long)
        ids = torch.zeros(b, w, dtype=torch.long)
        blk = torch.zeros(b, w, dtype=torch.bool)
        for i, x in enumerate(blocks):
            if len(x):
                ids[i, w - len(x):] = torch.tensor(list(x), dtype=torch.long)
                blk[i, w - len(x):] = True
        start = self.pos - (w - lens)  # absolute position of the block's column 0, per row
        for rid, iv in self.ivs:
            if rid in self.rids:
                iv.phase, iv.offset = phase, int(start[self.rids.index(rid)])
        mask = torch.cat([self.mask, blk], 1)
        pos = (start[:, None] + torch.arange(w)[None]).clamp(min=0)
        # no padding anywhere: no mask, as the one-row path runs (same attention kernel)
        am = None if bool(mask.all()) else mask.to(self.dev)
        from contextlib import nullcontext

        packed = self._packed.active() if self._packed is not None and w == 1 else nullcontext()
        intern: dict = {}
        groups = [intern.setdefault((g, tuple(x)), len(intern)) for g, x in zip(self.bottom, blocks)]
        keys = [(h, tuple(x)) for h, x in zip(self.hist, blocks)]
        with self._hooks(), packed:
            logits = self._forward(ids, am, pos, keep, groups, keys, [len(x) for x in blocks])
        self.forwards += 1
        self.mask, self.pos, self.bottom = mask, self.pos + lens, groups
        self.hist = [h + tuple(x) for h, x in zip(self.hist, blocks)]
        return logits[:, -keep:].float()

    def _forward(self, ids: torch.Tensor, am, pos: torch.Tensor, keep: int, groups: list[int], keys: list,
                 real: list[int]) -> torch.Tensor:
        """One forward of the batch: the layers below the first hooked one once per bottom group
        (``bottom.forward``) where rows share one or the lower-layer store may hold them, else the model's
        own forward. ``keys[r]``: what row r's block is kept under in the store (``lower.py``)."""
        from tamperbench.owmi.engine import bottom

        n_layers = int(self.model.config.num_hidden_layers)
        split = bottom.hooked_layer([iv.target.site for rid, iv in self.ivs if rid in self.rids], n_layers)
        for rid, iv in self.ivs:  # the rows whose lower layers a hook has written from now on
            if rid in self.rids:
                r = self.rids.index(rid)
                self.low[r] = min(self.low[r], bottom.hooked_layer([iv.target.site], n_layers))
        am = None if am is None else am.to(self.dev)
        kept = self.store is not None and split < n_layers
        if split and (kept or len(set(groups)) < len(groups)) and bottom.splittable(self.model):
            store_keys = [(id(self.model), split, *k) if kept and self.low[r] >= split else None
                          for r, k in enumerate(keys)]
            return bottom.forward(self.model, self.cache, ids.to(self.dev), am, pos.to(self.dev), keep, groups, split,
                                  store_keys, real, self.store if kept else None)
        return self.model(input_ids=ids.to(self.dev), attention_mask=am, position_ids=pos.to(self.dev),
                          use_cache=True, logits_to_keep=keep, **{self._kw: self.cache}).logits

    @torch.inference_mode()
    def tree(self, nodes: Sequence[Sequence[tuple[int, int]]], phase: Phase,
             rows: Sequence[int] | None = None) -> torch.Tensor:
        """Feed each row's packed trie in one forward and leave the cache as it was: ``nodes[r]`` is a list of
        (token, parent index in the list or -1), parents first. Node j sits at position ``pos[r] + depth``
        and attends to the row's real columns and to its own ancestors only (a 4-D mask), so its logits
        are those of feeding its prefix alone after the row -- every option of a closed set scored in one
        forward (``choice.score_rows``). Returns float32 logits (rows, W, V), row r's
        node j at column ``W - len(nodes[r]) + j``. Hooks see each column's absolute position
        (``Intervention.cols_at``: the noise operator draws by position).

        ``rows``: batch indices fed (``nodes[i]`` is row ``rows[i]``'s trie; default every row): they run as
        a batch of their own over a copy of their cache rows, each under its own hook."""
        if rows is not None and list(rows) != list(range(len(self.rids))):
            return self._part(rows).tree(nodes, phase)
        b = len(self.rids)
        assert len(nodes) == b, (len(nodes), b)
        w = max(1, max(len(n) for n in nodes))
        c = self.mask.shape[1]
        ids = torch.zeros(b, w, dtype=torch.long)
        pos = self.pos[:, None].repeat(1, w)
        allowed = torch.zeros(b, w, c + w, dtype=torch.bool)
        for r, ns in enumerate(nodes):
            off = w - len(ns)
            depth: list[int] = []
            for j, (tok, par) in enumerate(ns):
                depth.append(0 if par < 0 else depth[par] + 1)
                col = off + j
                ids[r, col], pos[r, col] = tok, self.pos[r] + depth[j]
                allowed[r, col, :c] = self.mask[r]
                allowed[r, col, c + col] = True
                while par >= 0:
                    allowed[r, col, c + off + par] = True
                    par = ns[par][1]
            for col in range(off):  # padding: attends to itself alone, read by no one
                allowed[r, col, c + col] = True
        for rid, iv in self.ivs:
            if rid in self.rids:
                r = self.rids.index(rid)
                iv.phase, iv.offset, iv.cols_at = phase, int(pos[r, 0]), pos[r].tolist()
        intern: dict = {}
        groups = [intern.setdefault((g, tuple(ns)), len(intern)) for g, ns in zip(self.bottom, nodes)]
        keys = [(h, ("tree", *ns)) for h, ns in zip(self.hist, nodes)]
        try:
            with self._hooks():
                logits = self._forward(ids, allowed[:, None], pos, w, groups, keys, [len(ns) for ns in nodes])
        finally:
            for _, iv in self.ivs:
                iv.cols_at = None
            extra = self.cache.get_seq_length() - c
            if extra > 0:
                self.cache.crop(-extra)
        self.forwards += 1
        return logits[:, -w:].float()

    def _part(self, order: Sequence[int]) -> Rows:
        """Rows ``order`` as a batch of their own (their cache rows, viewed where contiguous) under the same ids, each with the
        hook of its row here (the same Intervention objects, re-targeted to the part's batch indices)."""
        from tamperbench.owmi.engine.bottom import rows_of

        idx = torch.tensor(list(order), dtype=torch.long)
        rids = [self.rids[i] for i in order]
        part = self._take(Rows(self.model, rows_of(self.cache, order), self.mask[idx].clone(), rids, self.store), order)
        part.pos = self.pos[idx].clone()
        part.ivs = [(rid, iv) for rid, iv in self.ivs if rid in rids]
        return part

    def retire(self, rids: Sequence) -> None:
        """Compact rows ``rids`` away (cache, mask, positions); hooks follow the survivors."""
        keep = [i for i, r in enumerate(self.rids) if r not in set(rids)]
        idx = torch.tensor(keep, dtype=torch.long)
        for layer in self.cache.layers:
            layer.batch_select_indices(idx.to(layer.keys.device))
        self.mask, self.pos = self.mask[idx], self.pos[idx]
        self.rids = [self.rids[i] for i in keep]
        self.bottom = [self.bottom[i] for i in keep]
        self.hist = [self.hist[i] for i in keep]
        self.low = [self.low[i] for i in keep]

    @torch.inference_mode()
    def greedy(self, logits: torch.Tensor, max_new: int, eos: set[int], phase: Phase, *,
               keep: bool = False, grammars: Mapping | None = None) -> dict:
        """Greedy continuation of every row from ``logits`` (rows, V); returns rid -> (ids, finish).

        ``keep=False`` (probes): a finished row is compacted away at once. ``keep=True`` (the task,
        whose cache the delayed tracks reuse): every generated token is fed, the last one included
        (as the one-row path feeds it), and a finished row then takes holes until all are done.

        ``grammars`` (the ``constrained`` read-out): row id -> a fresh ``grammar.RowGrammar``
        (``models.decoding.grammar.matcher(tokenizer, JsonGrammar.from_schema(schema), eos_ids)``);
        such a row takes the arg-max over the tokens its grammar allows, and only EOS once the
        grammar is complete. Rows without one decode freely. The matchers are consumed."""
        from tamperbench.models.decoding.grammar import constrain

        outs: dict = {r: [] for r in self.rids}
        fin: dict = {}
        for k in range(max_new):
            if grammars:
                logits = constrain(logits, [None if r in fin else grammars.get(r) for r in self.rids])
            toks = logits.argmax(-1).tolist()
            feed: list[list[int]] = []
            for i, rid in enumerate(self.rids):
                if rid in fin:
                    feed.append([])
                    continue
                outs[rid].append(toks[i])
                if grammars and rid in grammars:
                    grammars[rid].consume(toks[i])
                if toks[i] in eos or k == max_new - 1:
                    fin[rid] = "eos" if toks[i] in eos else "length"
                feed.append([toks[i]])
            if keep:
                logits = self.extend(feed, phase)[:, -1]
                if len(fin) == len(outs):
                    break
                continue
            live = [i for i, rid in enumerate(self.rids) if rid not in fin]
            if not live:
                break
            if len(live) < len(self.rids):
                self.retire([r for r in self.rids if r in fin])
            logits = self.extend([feed[i] for i in live], phase)[:, -1]
        return {r: (outs[r], fin.get(r, "length")) for r in outs}


def _select_empty():
    from transformers import DynamicCache

    return DynamicCache()


class PrefixCache:
    """One-row caches of shared, unhooked prefixes (system prompt and turn header up to the first
    declared position), per model, computed once and forked into every batch that starts with them.
    Bounded: the last ``size`` prefixes are kept."""

    def __init__(self, size: int = 8, store=None):
        self.size = size
        self._got: dict = {}
        self.store = store  # a ``lower.LowerStore`` the batches keep their lower layers in (None: none)

    def get(self, model, ids: Sequence[int]):
        if not ids:
            return None
        key = (id(model), tuple(ids))
        if key not in self._got:
            from transformers import DynamicCache

            from tamperbench.owmi.engine import forward as fw

            cache = DynamicCache()
            fw.feed(model, cache, list(ids), 0, None, "prefill")
            self._got[key] = cache
            while len(self._got) > self.size:
                self._got.pop(next(iter(self._got)))
        return self._got[key]

    def rows(self, model, rows_ids: Sequence[Sequence[int]], first_declared: int, rids: Sequence) -> tuple[Rows, int]:
        """A batch of ``rids`` whose common prefix before ``first_declared`` comes from the prefix
        cache; returns (rows, fork): every row still has its tokens from ``fork`` on to feed."""
        common = len(rows_ids[0])
        for r in rows_ids[1:]:
            common = min(common, next((i for i, (a, b) in enumerate(zip(rows_ids[0], r)) if a != b), len(r)))
        fork = max(0, min(first_declared, common, min(len(r) for r in rows_ids) - 1))
        return Rows.fork(model, self.get(model, list(rows_ids[0][:fork])), rids, rows_ids[0][:fork], self.store), fork
