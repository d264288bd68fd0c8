"""Impact matching (Eq. 7) on the batched engine: the cell's units as rows of one ragged teacher-forced batch.

Why a module of its own: the calibration batch is the one batch of the batched engine (``batched.py``) that
grows with the data (a cell's units), sized against the memory free (models/memory.py ``ragged_rows``);
every bisection step feeds the same tokens, so the layers below the hook come from the engine's lower-layer
store (``lower.py``) after the first step, and only the layers from the hook up run again.
"""

from __future__ import annotations

from typing import Any

import torch

from tamperbench.owmi.engine import forward as fw

BASE = "__baseline__"  # a unit's unhooked row, where its baseline log-probs are not kept


class CalibrationRows:
    """``mean_js_rows`` and its batch sizing, mixed into ``BatchedEngine``."""

    spec: Any
    model: Any
    prefix: Any
    calibration_batch: Any
    make_iv: Any  # Engine.make_iv

    def mean_js_rows(self, units, eta: float) -> float:
        """Eq. 7's E[D(eta)]: the cell's units under ``random_matched`` at norm ``eta`` as rows of one
        ragged teacher-forced batch (task prompt + baseline answer per unit; lengths differ, so each
        block is left-padded and masked), instead of one forward per unit.

        Each row is fed ``js_chunk // rows`` positions per forward (one block stays js_chunk x
        vocabulary, as in :meth:`effects_rows`); a row that has run out takes holes. The baseline
        log-probs are the unit's kept chunks (``keep_baseline``); a unit over that budget gets an
        unhooked baseline row of its own in the same batch. Returns the mean over units of each
        unit's mean JS, the sequential path's formula (``Engine.calibrate``). Units run in groups of
        as many rows as memory allows (:meth:`calibration_groups`); one group when all fit."""
        per_unit: list[float] = []
        for group in self.calibration_groups(units):
            per_unit += self._mean_js_group(group, eta)
        return sum(per_unit) / len(units)

    def calibration_groups(self, units, free: int | None = None) -> list[list]:
        """Consecutive groups of ``units`` whose rows (one each, two without kept baseline log-probs)
        fit in memory at the longest row's length; sets ``calibration_batch`` (rows, why).
        ``free``: bytes of free memory (None: read this machine)."""
        from tamperbench.models.memory import ragged_rows

        need = [1 if u.base_chunks is not None else 2 for u in units]
        length = max(len(u.task.ids) + len(u.base_ids) for u in units)
        choice = ragged_rows(self.model, next(self.model.parameters()).device, length=length, limit=sum(need),
                             block_tokens=self.spec.js_chunk, free=free)
        self.calibration_batch = choice
        groups: list[list] = [[]]
        rows = 0
        for u, k in zip(units, need):
            if groups[-1] and rows + k > choice.rows:
                groups.append([])
                rows = 0
            groups[-1].append(u)
            rows += k
        return groups

    def _mean_js_group(self, units, eta: float) -> list[float]:
        """Each unit's mean JS at ``eta``, the units as rows of one ragged batch (:meth:`mean_js_rows`)."""
        seqs = [u.task.ids + u.base_ids for u in units]
        starts = [min(u.task.declared) if u.task.declared else 0 for u in units]
        rids = [("rm", i) for i in range(len(units))]
        rids += [(BASE, i) for i, u in enumerate(units) if u.base_chunks is None]
        row_seq = [seqs[i] for _, i in rids]
        rows, fork = self.prefix.rows(self.model, row_seq, min(starts), rids)
        for i, u in enumerate(units):
            u.eta = eta
            rows.attach(("rm", i), self.make_iv(u, "random_matched", u.task.declared))
        step = max(1, self.spec.js_chunk // len(rids))
        at = {r: fork for r in rids}  # next position to feed, per row
        total = torch.zeros(len(units), dtype=torch.float64)
        n = [0] * len(units)
        while any(at[r] < len(s) for r, s in zip(rids, row_seq)):
            blocks = [s[at[r]: at[r] + step] for r, s in zip(rids, row_seq)]
            w = max(len(b) for b in blocks)
            logits = rows.extend(blocks, "prefill", keep=w)  # (rows, w, V), each row right-aligned
            lps = {}
            for k, (r, b) in enumerate(zip(rids, blocks)):
                i, lo, hi = r[1], at[r], at[r] + len(b)
                a = max(lo, starts[i])
                if a < hi:  # the row's scored positions a..hi-1 are its last hi - a columns
                    lps[r] = (a, hi, torch.log_softmax(logits[k, w - (hi - a):], dim=-1))
            del logits
            for i, u in enumerate(units):
                if ("rm", i) not in lps:
                    continue
                a, hi, lq = lps[("rm", i)]
                lp = lps[(BASE, i)][2] if u.base_chunks is None else _positions(u.base_chunks, a - starts[i],
                                                                               hi - starts[i])
                js = fw.js_rows(lp, lq)
                total[i] += float(js.sum())
                n[i] += js.numel()
            for r, b in zip(rids, blocks):
                at[r] += len(b)
        return [float(total[i]) / n[i] if n[i] else 0.0 for i in range(len(units))]


def _positions(chunks: list[torch.Tensor], lo: int, hi: int) -> torch.Tensor:
    """Rows ``lo..hi-1`` of the concatenation of ``chunks`` (the kept baseline log-probs), without
    concatenating the whole list."""
    out, base = [], 0
    for c in chunks:
        a, b = max(lo, base), min(hi, base + c.shape[0])
        if a < b:
            out.append(c[a - base: b - base])
        base += c.shape[0]
        if base >= hi:
            break
    return out[0] if len(out) == 1 else torch.cat(out)
