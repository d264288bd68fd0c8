"""Row state of the step decoder: what each row holds besides its KV columns.

Why separate: the pending distribution, the one held for a free one-token rollback, and the
row's token list must move together on every fork, snapshot, import and compaction. Keeping
those moves in one place means a new piece of per-row state cannot be forgotten in one of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from tamperbench.models.decoding.distributions import DistStats

__all__ = ["PendingState", "Row", "RowSnapshot", "StepResult"]


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
    next_greedy: int  # arg-max of the new pending distribution (unconstrained): the free look-ahead
    # under a grammar (StepDecoder.set_grammar): True once it is complete, so only EOS may follow;
    # None for a row without one
    grammar_done: bool | None = None


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
    stats: DistStats
    prev_stats: DistStats
    pos: int
    # a cascade.SharedPrefix the row reads before ``kv`` (its private columns); None: ``kv`` is
    # the whole row. Only the prefix admitter builds such snapshots; export_row never does.
    shared: Any = None
    grammar: Any = None  # the row's grammar.RowGrammar (a copy), None without one


@dataclass
class Row:
    rid: int
    tokens: list[int]  # the row's context (prompt + emitted); all cached except a pending ``refeed``
    n_prompt: int
    can_rollback: bool = False  # the previous pending distribution is still held for this row
    refeed: int | None = None  # token to re-feed (after a multi-token rollback) before emitting
    extra: dict = field(default_factory=dict)
    grammar: Any = None  # grammar.RowGrammar constraining the generated tokens; None: free decoding

    def copy(self, rid: int) -> Row:
        return Row(rid, list(self.tokens), self.n_prompt, self.can_rollback, self.refeed, dict(self.extra),
                   self.grammar.copy() if self.grammar is not None else None)


class PendingState:
    """Per slot: the pending next-token log-probs and their statistics, plus the previous ones
    (what a one-token rollback restores without a forward)."""

    def __init__(self, topk: int, device: torch.device):
        self.topk, self.device = topk, device
        # allocated on the first row (the vocabulary size is known then); Any: mypy cannot see that
        self.logp: Any = None  # (b, V) float32 torch.Tensor
        self.prev_logp: Any = None
        self.stats: Any = None  # DistStats
        self.prev_stats: Any = None

    def grow(self, grow: int, vocab: int) -> None:
        """Append ``grow`` zero slots (allocating on first use)."""
        if self.logp is None:
            self.logp = torch.zeros(0, vocab, device=self.device)
            self.prev_logp = self.logp.clone()
            self.stats = DistStats.empty(self.topk, self.device)
            self.prev_stats = DistStats.empty(self.topk, self.device)
        pad = lambda t: torch.cat([t, t.new_zeros((grow, *t.shape[1:]))])  # noqa: E731
        self.logp, self.prev_logp = pad(self.logp), pad(self.prev_logp)
        self.stats, self.prev_stats = self.stats.map(pad), self.prev_stats.map(pad)

    def write(self, idx, logp: torch.Tensor, stats: DistStats) -> None:
        self.logp[idx] = logp
        self.stats.assign(idx, stats)

    def push(self, logp: torch.Tensor, stats: DistStats) -> None:
        """After a step: the current distribution becomes the previous one."""
        self.prev_logp, self.prev_stats = self.logp, self.stats
        self.logp, self.stats = logp, stats

    def restore(self, s: int) -> None:
        """One-token rollback of slot ``s``: the previous distribution is pending again."""
        self.logp[s] = self.prev_logp[s]
        self.stats.assign(s, self.prev_stats.map(lambda t: t[s]))

    def copy(self, src: int, idx) -> None:
        for t in (self.logp, self.prev_logp, *self.stats.tensors(), *self.prev_stats.tensors()):
            t[idx] = t[src].clone()

    def export(self, s: int) -> tuple[torch.Tensor, torch.Tensor, DistStats, DistStats]:
        take = lambda t: t[s].clone()  # noqa: E731
        return take(self.logp), take(self.prev_logp), self.stats.map(take), self.prev_stats.map(take)

    def load(self, idx, snap: RowSnapshot) -> None:
        self.logp[idx] = snap.logp
        self.prev_logp[idx] = snap.prev_logp
        self.stats.assign(idx, snap.stats)
        self.prev_stats.assign(idx, snap.prev_stats)

    def select(self, idx: torch.Tensor) -> None:
        """Keep only the slots ``idx`` (compaction)."""
        self.logp, self.prev_logp = self.logp[idx], self.prev_logp[idx]
        self.stats, self.prev_stats = self.stats.map(lambda t: t[idx]), self.prev_stats.map(lambda t: t[idx])

    def reset(self) -> None:
        self.logp = self.prev_logp = self.stats = self.prev_stats = None

