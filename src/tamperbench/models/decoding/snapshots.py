"""Rows copied out of the step decoder and admitted again (a mixin of ``StepDecoder``).

Why: a shared prompt prefix waits for free slots as a snapshot (models/prefix_share.py), and the
prefix store re-admits a finished conversation for its retry; a snapshot carries everything a row
holds (KV columns, tokens, pending distributions, position, grammar state) so it resumes exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tamperbench.models.decoding.rows import Row, RowSnapshot

__all__ = ["SnapshotRows"]


class SnapshotRows:
    """``export_row`` / ``import_rows`` / ``import_many`` over a ``StepDecoder``'s slots."""

    # the StepDecoder's (declared for the type checker)
    slots: list
    by_id: dict
    kv: Any
    state: Any
    shared_prefix_attention: Any
    cascade_rows: int
    free_slots: Any
    _make_room: Any
    _place: Any

    @torch.inference_mode()
    def export_row(self, rid: int) -> RowSnapshot:
        """Copy one row out of the batch (its real columns only), to re-admit later as any
        number of rows with :meth:`import_rows`: how a shared prefix waits for free slots."""
        s = self.by_id[rid]
        row = self.slots[s]
        logp, prev_logp, stats, prev_stats = self.state.export(s)
        return RowSnapshot(self.kv.export(s), list(row.tokens), row.n_prompt, row.can_rollback, row.refeed, logp,
                           prev_logp, stats, prev_stats, int(self.kv.pos[s]),
                           grammar=row.grammar.copy() if row.grammar is not None else None)

    @torch.inference_mode()
    def import_rows(self, snap: RowSnapshot, copies: int = 1) -> list[int]:
        if copies > self.free_slots:
            raise ValueError(f"{copies} rows but only {self.free_slots} free slots")
        kv, shared = self._row_kv(snap)
        slots, idx = self._make_room(kv[0][0].shape[1], copies)
        self._load(idx, kv, shared, snap)
        return self._place(slots, [_row(snap)] * copies)

    @torch.inference_mode()
    def import_many(self, snaps: Sequence[RowSnapshot]) -> list[int]:
        """One row per snapshot, in order (the slots :meth:`import_rows` one by one would give), the
        batch and buffers grown once for all: one by one grew the pending log-probs (rows x
        vocabulary, twice) a row at a time, about 0.8 s of copying for an Exact Words call of 74 rows."""
        if len(snaps) > self.free_slots:
            raise ValueError(f"{len(snaps)} rows but only {self.free_slots} free slots")
        if not snaps:
            return []
        kvs = [self._row_kv(snap) for snap in snaps]
        slots, idx = self._make_room(max(kv[0][0].shape[1] for kv, _ in kvs), len(snaps))
        for k, ((kv, shared), snap) in enumerate(zip(kvs, snaps)):
            self._load(idx[k: k + 1], kv, shared, snap)
        return self._place(slots, [_row(s) for s in snaps])

    def _row_kv(self, snap: RowSnapshot) -> tuple[list, object]:
        """The columns a row of ``snap`` holds here, and its shared prefix (None on the copy path,
        where the prefix is copied into the row)."""
        kv, shared = snap.kv, snap.shared
        if shared is not None and self.shared_prefix_attention is None:
            kv = [(torch.cat([pk[0], k], 1), torch.cat([pv[0], v], 1)) for (pk, pv), (k, v) in zip(shared.kv, kv)]
            shared = None
        return kv, shared

    def _load(self, idx: torch.Tensor, kv: list, shared, snap: RowSnapshot) -> None:
        self.kv.write_block(idx, kv)
        if shared is not None:
            self.kv.group[idx.cpu()] = self.kv.attach(shared)
            self.cascade_rows += len(idx)
        self.kv.pos[idx] = snap.pos
        self.state.load(idx, snap)



def _row(snap: RowSnapshot) -> Row:
    """The row a snapshot resumes as (``_place`` copies it, grammar state included, per slot)."""
    return Row(-1, snap.tokens, snap.n_prompt, snap.can_rollback, snap.refeed, grammar=snap.grammar)
