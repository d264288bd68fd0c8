"""How a probe's answer is read out (``OwmiSpec.readout``), for the batched and the reference engine\n(each engine holds one :class:`Readout`).

* ``generated`` (the paper's, the default): greedy decoding of the JSON answer, parsed afterwards.
* ``choice``: a token-level read-out (``owmi/engine/choice.py``): the JSON prefix is teacher-forced with the
  probe and the closed option set is scored; nothing is decoded.
* ``constrained``: greedy decoding under a grammar built from the probe's JSON schema.

Each answer is a tuple ``(ids, text, finish)``, with a fourth element, the option log-probabilities,
under ``choice``. Whatever the read-out, the probe context is fed by the same code and each row keeps
its own row-targeted intervention (``iv_for``), phase ``probe``: the read-out changes what is read,
never what is altered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tamperbench.owmi.engine import choice as ch


class Readout:
    """How a probe's answer is read under the spec's read-out; each engine holds one."""

    def __init__(self, spec, n_layers: int):
        self.spec, self.n_layers = spec, n_layers
        self._grammars: dict[str, Any] = {}

    def forced(self, family: str, tokenizer) -> list[int]:
        """Ids teacher-forced after the probe context before reading: the JSON prefix under ``choice``."""
        if self.spec.readout != "choice":
            return []
        return ch.tokenize(tokenizer, ch.closed_set(family, self.n_layers)).prefix

    def grammar(self, family: str):
        """The ``constrained`` read-out's grammar of ``family`` (a ``JsonGrammar``; None: free text)."""
        from tamperbench.owmi.protocol.probe_schema import probe_schema

        cache = self._grammars
        if family not in cache:
            schema = probe_schema(family, self.n_layers)
            if schema is None:
                cache[family] = None
            else:
                from tamperbench.models.decoding.grammar import JsonGrammar

                cache[family] = JsonGrammar.from_schema(schema, option="--readout")
        return cache[family]

    def answer_rows(self, rows, logits: torch.Tensor, family: str | dict, max_new: int, eos: set[int],
                    iv_for: Callable[[Any], Any], tokenizer) -> dict:
        """rid -> answer of every row of a ``ragged.Rows`` batch whose probe (and forced prefix) was
        just fed; ``logits`` (rows, V) at its last position; ``iv_for(rid)`` a fresh copy of the row's
        intervention (None: unhooked, the observer). ``family``: the rows' probe family, or rid -> family."""
        if self.spec.readout == "choice":
            fams = family if isinstance(family, dict) else {rid: family for rid in rows.rids}
            sets = {f: ch.closed_set(f, self.n_layers) for f in dict.fromkeys(fams.values())}
            toks = {f: ch.tokenize(tokenizer, cs) for f, cs in sets.items()}
            # the tries run under the rows' own hooks, phase probe (the hook each row's probe ran under)
            seq = ch.score_rows(logits, [toks[fams[rid]].seqs for rid in rows.rids],
                                lambda part, nodes: rows.tree(nodes, "probe", part), int(logits.shape[-1]))
            return {rid: ([], "", "choice", ch.option_scores(seq[i][None], toks[fams[rid]].owner,
                                                             len(sets[fams[rid]].options))[0].tolist())
                    for i, rid in enumerate(rows.rids)}
        kw = {}
        if self.spec.readout == "constrained":
            from tamperbench.models.decoding.grammar import row_grammars

            fam = family if isinstance(family, dict) else {rid: family for rid in rows.rids}
            kw["grammars"] = row_grammars(tokenizer, {rid: self.grammar(fam[rid]) for rid in rows.rids}, sorted(eos))
        got = rows.greedy(logits, max_new, eos, "probe", **kw)
        return {rid: (ids, tokenizer.decode(ids, skip_special_tokens=True), fin) for rid, (ids, fin) in got.items()}

    def answer_plain(self, model, cache, logits: torch.Tensor, start: int, family: str, max_new: int,
                     eos: set[int], group, iv_for_row: Callable[[int], Any], tokenizer) -> list[tuple]:
        """The reference engine's counterpart on equal-length rows over a plain cache: answers in row
        order. ``group``: the rows' hook (``forward.IvGroup``, one Intervention or None) the generated
        read-out decodes under; ``iv_for_row(i)`` a fresh copy of row i's intervention."""
        from tamperbench.owmi.engine import forward as fw

        if self.spec.readout == "choice":
            cs = ch.closed_set(family, self.n_layers)
            tk = ch.tokenize(tokenizer, cs)
            scores = ch.option_scores(ch.score_options(logits, tk.seqs, _plain_branch(model, cache, start, iv_for_row),
                                                       ch.cache_row_bytes(cache)), tk.owner, len(cs.options))
            return [([], "", "choice", scores[i].tolist()) for i in range(scores.shape[0])]
        kw = {}
        if self.spec.readout == "constrained":
            from tamperbench.models.decoding.grammar import matcher

            g = self.grammar(family)
            kw = {} if g is None else {"grammars": [matcher(tokenizer, g, sorted(eos)) for _ in range(logits.shape[0])]}
        if logits.shape[0] == 1 and not isinstance(group, fw.IvGroup):
            ids, fin = fw.greedy(model, cache, logits, start, max_new, eos, group, "probe",
                                 **({"grammar": kw["grammars"][0]} if kw else {}))
            return [(ids, tokenizer.decode(ids, skip_special_tokens=True), fin)]
        got = fw.greedy_rows(model, cache, logits, start, max_new, eos, group, "probe", **kw)
        return [(ids, tokenizer.decode(ids, skip_special_tokens=True), fin) for ids, fin in got]


def _ragged_branch(rows, iv_for) -> ch.Branch:  # pragma: no cover - kept beside the packed tries for comparison
    """Blocks fed on copies of rows of a ``ragged.Rows``; a parent's copies share one fresh copy of its
    intervention (equal-length blocks: they start at the same position)."""

    def branch(parents: list[int], blocks: list[list[int]]) -> torch.Tensor:
        rids = [(rows.rids[p], j) for j, p in enumerate(parents)]
        sub = rows.select(parents, rids)
        for p in dict.fromkeys(parents):
            mine = tuple(r for r, q in zip(rids, parents) if q == p)
            iv = iv_for(rows.rids[p])
            if iv is not None:
                sub.attach(mine[0], iv)
                iv.rows = lambda mine=mine: [sub.rids.index(r) for r in mine if r in sub.rids]
        return sub.extend(blocks, "probe", keep=len(blocks[0]))

    return branch


def _plain_branch(model, cache, start: int, iv_for_row) -> ch.Branch:
    """Blocks fed on copies of rows of a lock-step cache (every row at position ``start``)."""
    import copy

    from tamperbench.owmi.engine import forward as fw

    def branch(parents: list[int], blocks: list[list[int]]) -> torch.Tensor:
        sub = copy.deepcopy(cache)  # keeps the cache's own layer kinds (a sliding window stays one)
        for layer in sub.layers:
            layer.batch_select_indices(torch.tensor(parents, dtype=torch.long, device=layer.keys.device))
        ivs = []
        for j, p in enumerate(parents):
            iv = iv_for_row(p)
            if iv is not None:
                iv.rows = [j]
                ivs.append(iv)
        group = fw.IvGroup(ivs)
        group.phase, group.offset = "probe", start
        with fw._hooks(model, group if ivs else None), torch.inference_mode():  # type: ignore[arg-type]
            out = model(input_ids=torch.tensor(blocks, device=next(model.parameters()).device), use_cache=True,
                        logits_to_keep=len(blocks[0]), **{fw._cache_kw(model): sub})
        return out.logits.float()

    return branch
