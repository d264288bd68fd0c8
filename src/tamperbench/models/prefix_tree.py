"""Prefix-tree prefill under cascade attention: what prompts share beyond their group's prefix.

Why: a group's prompts share more than the prefix that cascade attention reads once a step. In
Exact Words a document's prompts all start with the chat template's system prompt (shared with
every other document's prompts too), then the document, then per item an instruction that both
arms repeat word for word before the ``strict`` arm's extra sentence: of the standard preset's
7,353 prefill tokens under one-level sharing, 1,361 were such repeats (35 system-prompt tokens in
each of 10 document prefixes, about 27 item tokens in each arm pair). Prefill is compute-bound on
a CPU, so a repeated token costs what a new one does.

How (models/prefix_share.py calls these; greedy answers stay those of each prompt prefilled
alone, up to float32 rounding, checked token for token by the tests and the quote benchmark):

- Root: the token prefix common to every planned group's prefix (:func:`root_length`) is
  prefilled once a call (batch 1); each group's prefix is then the root's cache plus one forward
  of the rest (:func:`prefill_prefix`).
- Branches: inside a group, the members admitted together are planned again on their parts after
  the group's prefix (:func:`plan_branches`, the same dynamic programme as the groups). Each branch
  shared by two or more members is prefilled once, as one row over the group's prefix; each
  member's tail is then fed over the prefix and its branch. A member's private columns (what its
  decoder row holds) are its branch, then its tail.
- Forwards: :func:`admit_tree` feeds every admitted group's branches in common forwards, then
  every member's tail (cut by length, ``split_by_length``): a forward of a few short rows costs
  about what a one-token forward does (every weight read once), and one forward per group and
  level made 41 forwards for Exact Words' ten documents. The cache of such a forward holds only
  the rows' private columns; each row's prefix is read once a layer by its group's queries
  (decoding/cascade_prefill.py), never copied into the rows (that copy was about a third of a
  35-row forward).

Layout of one forward (:func:`rows_forward`): private columns ``[branch | tail]`` per row, branches
right-aligned to the longest one of the forward (a masked gap before a shorter one), so a row's
private columns are one contiguous run, and tails right-padded. Positions are each token's own
(prefix length + its branch length + its index), passed explicitly, so the gap changes no rotary
angle. A gap means a window measured in columns is not one measured in positions, so this runs
under cascade attention only, which sliding-window models never take (decoding/cascade.py,
``cascade_mode``); the copy path keeps the one-level prefill exactly as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tamperbench.models.prefix_groups import MIN_SHARED, Group, common_prefix, plan_groups

__all__ = ["Branch", "admit_rows", "admit_tree", "plan_branches", "prefill_prefix", "private", "root_length", "rows_forward",
           "tree_prefill_tokens"]

Branch = tuple[int, list]  # (its tokens after the group's prefix, per layer (keys, values) (kv_heads, n, d))


def root_length(groups: Sequence[Group], prompts: Sequence[Sequence[int]], *, min_shared: int = MIN_SHARED) -> int:
    """Tokens every sharing group's prefix starts with (0 when under two groups share or fewer than
    ``min_shared`` tokens are common: a root forward would then cost more than it saves)."""
    heads = [list(prompts[g.members[0]][: g.prefix]) for g in groups if g.prefix > 0]
    if len(heads) < 2:
        return 0
    n = min(len(h) for h in heads)
    for h in heads[1:]:
        n = min(n, common_prefix(heads[0], h))
    return n if n >= min_shared else 0


def plan_branches(prompts: Sequence[Sequence[int]], prefix: int, *, min_shared: int = MIN_SHARED) -> list[Group]:
    """The groups of ``prompts`` (one admission of one group's members) by their parts after the
    first ``prefix`` tokens: ``Group(branch length, member indices)``; length 0: no branch shared."""
    return plan_groups([list(q[prefix:]) for q in prompts], min_shared=min_shared)


def tree_prefill_tokens(groups: Sequence[Group], prompts: Sequence[Sequence[int]]) -> int:
    """Tokens fed under the tree when each group's members are admitted together: the root once,
    each group's prefix after the root, each branch once, each member's tail (a hand-checkable
    count; ``PrefixAdmitter.prefill_tokens`` reports what a call really fed)."""
    root = root_length(groups, prompts)
    total = root
    for g in groups:
        if g.prefix == 0:
            total += sum(len(prompts[i]) for i in g.members)
            continue
        total += g.prefix - root
        qs = [prompts[i] for i in g.members]
        for b in (plan_branches(qs, g.prefix) if len(qs) > 1 else [Group(0, list(range(len(qs))))]):
            total += b.prefix + sum(len(qs[k]) - g.prefix - b.prefix for k in b.members)
    return total


def prefill_prefix(dec: Any, ids: list[int], root: tuple[int, list] | None = None) -> list:
    """Per layer (keys, values), batch 1, of ``ids``; from ``root`` = (its length, its kv) when given
    (``ids`` starts with the root's tokens), feeding only the tokens after it."""
    from transformers import DynamicCache

    start = root[0] if root is not None else 0
    if root is not None and start == len(ids):
        return root[1]
    cache = DynamicCache()
    for li, (k, v) in enumerate(root[1] if root is not None else []):
        cache.update(k, v, li)
    t = torch.tensor([ids[start:]], device=dec.device)
    am = torch.ones(1, len(ids), dtype=torch.bool, device=t.device)
    dec._forward(t, am, torch.arange(start, len(ids), device=t.device)[None], cache, logits_to_keep=1)
    return [(layer.keys, layer.values) for layer in cache.layers]


def rows_forward(dec: Any, heads: Sequence[Any], prompts: Sequence[Sequence[int]], branches: Sequence[Branch | None]):
    """One forward of each prompt's tail over its prefix (``heads[r]``, a cascade.SharedPrefix) and
    its branch. Returns (logits at each row's last real token (rows, vocab), per layer (keys,
    values), branch lengths, tail lengths, the column where tails start); ``private`` cuts a row's
    own columns out of the keys and values.

    Under cascade attention (``dec.shared_prefix_attention``) the cache holds only the rows'
    private columns ``[branch | tail]`` (branches right-aligned, masked gap before a shorter one)
    and each prefix is read once a layer (decoding/cascade_prefill.py); rows of different prefixes
    share the forward. Otherwise (the copy path: one prefix, no branch) every row reads a copy of the
    prefix before its tail, as before the tree."""
    from transformers import DynamicCache

    m, dev = len(prompts), dec.device
    ps = [h.length for h in heads]
    sps = [0 if b is None else b[0] for b in branches]
    S = max(sps)
    lens = [len(q) - p - sp for q, p, sp in zip(prompts, ps, sps)]
    L = max(lens)
    ids = torch.full((m, L), dec.pad_id, dtype=torch.long, device=dev)
    pos = torch.empty(m, L, dtype=torch.long, device=dev)
    for r, (q, p, sp, k) in enumerate(zip(prompts, ps, sps, lens)):
        ids[r, :k] = torch.tensor(q[p + sp:], device=dev)
        pos[r] = torch.arange(p + sp, p + sp + L, device=dev)
    last = torch.tensor([[k - 1] for k in lens], device=dev)  # (m, 1): each row's own last token
    cache = DynamicCache()
    if dec.shared_prefix_attention is None:  # the copy path
        if S or any(h is not heads[0] for h in heads):
            raise ValueError("the copy path prefills one prefix and no branch per forward")
        p = ps[0]
        am = torch.zeros(m, p + L, dtype=torch.bool, device=dev)
        am[:, :p] = True
        for r, k in enumerate(lens):
            am[r, p:p + k] = True
        for li, (k0, v0) in enumerate(heads[0].kv):
            cache.update(k0.expand(m, -1, -1, -1), v0.expand(m, -1, -1, -1), li)
        logits = dec._forward(ids, am, pos, cache, logits_to_keep=last)[:, -1]
        return logits, [(layer.keys, layer.values) for layer in cache.layers], sps, lens, p
    from tamperbench.models.decoding.cascade_prefill import PrefillStep, prefill_forward, private_mask

    if S:
        for li, (k0, _) in enumerate(heads[0].kv):
            bk = k0.new_zeros(m, k0.shape[1], S, k0.shape[3])
            bv = torch.zeros_like(bk)
            for r, b in enumerate(branches):
                if b is not None:
                    bk[r, :, S - b[0]:], bv[r, :, S - b[0]:] = b[1][li]
            cache.update(bk, bv, li)
    groups = [(torch.tensor([r for r, x in enumerate(heads) if x is h], device=dev), h) for h in dict.fromkeys(heads)]
    step = PrefillStep(groups, private_mask(sps, lens, S, L, dev))
    logits = prefill_forward(dec, ids, pos, cache, step, last)[:, -1]
    return logits, [(layer.keys, layer.values) for layer in cache.layers], sps, lens, S


def private(kv: list, r: int, sp: int, k: int, end: int) -> list:
    """Row ``r``'s private columns (its branch, then its tail) from ``rows_forward``'s kv: a view."""
    return [(keys[r, :, end - sp: end + k], values[r, :, end - sp: end + k]) for keys, values in kv]


def admit_rows(dec: Any, heads: Sequence[Any], prompts: Sequence[Sequence[int]], branches: Sequence[Branch | None]
               ) -> list[int]:
    """One ``rows_forward``, then each row admitted into the decoder as its private columns' KV over
    its prefix: the decoder keeps the prefix once and reads it once a step (cascade attention), or
    copies it into the row (the copy path, decoding/cascade.py). Returns the row ids, in order."""
    from tamperbench.models.decoding.rows import RowSnapshot

    logits, kv, sps, lens, end = rows_forward(dec, heads, prompts, branches)
    logp, stats = dec.distribution(logits)
    order = sorted(range(len(prompts)), key=lambda r: -(sps[r] + lens[r]))  # longest first, as always
    snaps = []
    for r in order:
        q = prompts[r]
        st = stats.map(lambda t: t[r])  # noqa: B023
        snaps.append(RowSnapshot(private(kv, r, sps[r], lens[r], end), list(q), len(q), False, None, logp[r],
                                 logp[r], st, st, len(q), heads[r]))
    rids = [0] * len(prompts)
    for r, rid in zip(order, dec.import_many(snaps)):
        rids[r] = rid
    return rids


@torch.inference_mode()
def admit_tree(adm: Any, batch: Sequence[tuple[Any, list[int]]]) -> list[tuple[int, int]]:
    """Admit the members ``take`` of every pending group in ``batch`` (a prefix_share.PrefixAdmitter's),
    level by level: each group's prefix (after the root), then every group's branches in common
    forwards, then every member's tail in common forwards (cut by :func:`split_by_length`).

    Why common forwards across groups: a forward of a few short rows costs about what one of a
    single token does (every weight is read once; measured about 65 ms on the embedded model,
    ~20 prefill tokens' worth), and Exact Words' ten documents made 41 such forwards; rows of
    different prefixes share one forward, each row's prefix in its own columns (masked gap after
    a shorter one). Returns (row id, prompt index) pairs."""
    from tamperbench.models.decoding.cascade import SharedPrefix
    from tamperbench.models.prefix_groups import split_by_length

    dec = adm.dec
    heads: list = []
    qs: list[list[int]] = []
    idx: list[int] = []
    todo: list[tuple[Any, list[int], int, Group]] = []  # branch rows: prefix, tokens, first member, plan
    for pend, take in batch:
        p = pend.group.prefix
        if pend.shared is None:
            pend.shared = SharedPrefix(adm._prefill_prefix(list(adm.prompts[take[0]][:p]), True))
        gq = [list(adm.prompts[i]) for i in take]
        if len(gq) > 1:
            todo += [(pend.shared, gq[g.members[0]][: p + g.prefix], len(qs), g)
                     for g in plan_branches(gq, p) if g.prefix > 0]
        heads += [pend.shared] * len(gq)
        qs += gq
        idx += take
    branches: list[Branch | None] = [None] * len(qs)
    if todo:
        blens = [g.prefix for _, _, _, g in todo]
        for part in split_by_length(blens, prefix=0):  # rows hold only their own columns
            _, kv, _, lens, end = rows_forward(dec, [todo[k][0] for k in part], [todo[k][1] for k in part],
                                               [None] * len(part))
            for r, k in enumerate(part):
                _, _, first, g = todo[k]
                cols = [(a.clone(), b.clone()) for a, b in private(kv, r, 0, lens[r], end)]
                for j in g.members:
                    branches[first + j] = (g.prefix, cols)
            adm.prefill_tokens += sum(blens[k] for k in part)
    sps = [0 if b is None else b[0] for b in branches]
    tails = [len(q) - h.length - sp for q, h, sp in zip(qs, heads, sps)]
    out: list[tuple[int, int]] = []
    # longest forward first: the decoder's buffers then grow once, not once per forward
    for part in reversed(split_by_length(tails, prefix=max(sps))):
        rids = admit_rows(dec, [heads[k] for k in part], [qs[k] for k in part], [branches[k] for k in part])
        out.extend(zip(rids, [idx[k] for k in part]))
        adm.prefill_tokens += sum(tails[k] for k in part)
    return out
