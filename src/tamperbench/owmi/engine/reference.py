"""The one-at-a-time reference engine: each condition of a unit on its own.

It answers the task once per condition, probes the delayed and visible tracks once per condition,
asks the observer once per probe family and teacher-forces one condition at a time, over plain
transformers caches. It is the oracle the batched engine (``batched.py``) is tested against (same
records, greedy tokens identical, JS within float rounding), and the engine of models whose
sliding-window attention the ragged rows cannot express (``ragged.supported``: Gemma 3).

Each condition's task prefix is prefilled once under its hook and its KV cache is cropped back and
reused by every probe family and both scopes (pairs sharing a prefix up to the intervened
positions reuse it). Records are grouped per batch: Tracks A and B_masked as one batch of
conditions x scopes, a delayed or visible track per condition, the observer per probe family.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from tamperbench.owmi.engine import forward as fw
from tamperbench.owmi.engine.base import Batch, Engine
from tamperbench.owmi.engine.operators import Intervention
from tamperbench.owmi.engine.unit import Unit

FRESH_TRACKS = ("A", "B_masked")  # contexts independent of the condition: one batch of conditions x scopes


class ReferenceEngine(Engine):
    """One condition at a time (the oracle, and sliding-window models)."""

    kind = "reference"

    # ------------------------------------------------------------------ what the runner asks
    def effects(self, unit: Unit, conds: list[str]) -> dict[str, dict]:
        return {c: self.effect(unit, c) for c in conds}

    def fill_effects(self, unit: Unit, need: set[str]) -> None:
        for cond in self.model_conditions():
            if cond not in unit.effects and cond in need:
                unit.effects[cond] = self.effect(unit, cond)

    def group(self, d: dict) -> tuple:
        if d["condition"] == "observer":
            return (d["track"], "observer", d["observer_tier"], d["probe"])
        return (d["track"], "rows") if d["track"] in FRESH_TRACKS else (d["track"], d["condition"])

    def probe_batches(self, unit: Unit, track: str) -> list[Batch]:
        fams, max_new = self.track_axes(track)
        conds, scopes = self.model_conditions(), self.spec.scopes
        if track in FRESH_TRACKS:
            return [((track, "rows"), lambda: self.probe_fresh(unit, track, conds, fams, scopes, max_new))]
        probe = self.probe_delayed if track in ("B_delayed", "C") else self.probe_visible
        return [((track, c), functools.partial(probe, unit, c, fams, scopes, max_new)) for c in conds]

    def observer_batches(self, unit: Unit, track: str, tier: int, backend) -> list[Batch]:
        fams, max_new = self.track_axes(track)
        def one(f: str) -> dict:
            return {f: self.observe(backend, unit, track, f, max_new)}

        return [((track, "observer", tier, f), functools.partial(one, f)) for f in fams]

    # ------------------------------------------------------------------ teacher-forced effects
    def effect(self, unit: Unit, cond: str) -> dict:
        """Teacher-forced JS over the task prompt + baseline answer, and the causal relevance of
        the altered object for the gold answer (log-prob change, nats)."""
        ids = unit.task.ids + unit.base_ids
        iv = self.make_iv(unit, cond, unit.task.declared)
        assert iv is not None  # only the model conditions reach the teacher-forced effects
        start = min(unit.task.declared) if unit.task.declared else 0
        self.keep_baseline(unit)
        js_mean, js_max, n = fw.js_divergence(self.model, ids, start, iv, chunk=self.spec.js_chunk,
                                              baseline=unit.base_chunks)
        out = dict(js_mean=js_mean, js_max=js_max, js_positions=n, delta_norm=iv.mean_delta_norm)
        if unit.item.answer:
            gold = self.b.tokenizer(unit.item.answer, add_special_tokens=False)["input_ids"]
            if unit.base_answer_lp is None:
                unit.base_answer_lp = fw.answer_logprob(self.model, unit.task.ids, gold, None)
            base = unit.base_answer_lp
            alt = fw.answer_logprob(self.model, unit.task.ids, gold, self.make_iv(unit, cond, unit.task.declared))
            out.update(answer_logprob_base=base, answer_logprob_altered=alt, causal_effect=base - alt)
        return out

    # ------------------------------------------------------------------ the task under one condition
    def task_generation(self, unit: Unit, cond: str):
        """The task answered under the condition's hook, cache kept for the delayed tracks."""
        if cond not in unit.gens:
            iv = self.make_iv(unit, cond, unit.task.declared)
            cache = fw.new_cache(self.model)
            logits = fw.feed(self.model, cache, unit.task.ids, 0, iv, "prefill")
            ids, _ = fw.greedy(self.model, cache, logits, len(unit.task.ids), self.spec.task_max_new_tokens,
                               self.eos, iv, "decode")
            if ids:  # greedy never feeds its last token (EOS included): feed it so the cache holds the answer
                fw.feed(self.model, cache, ids[-1:], len(unit.task.ids) + len(ids) - 1, iv, "decode")
            unit.gens[cond] = (cache, ids, self.b.tokenizer.decode(ids, skip_special_tokens=True), iv)
        return unit.gens[cond]

    def task_answer(self, unit: Unit, cond: str) -> str:
        return self.task_generation(unit, cond)[2]

    # ------------------------------------------------------------------ probing
    def _row_group(self, unit: Unit, rows: list[tuple[str, str]], declared: list[int]) -> fw.IvGroup:
        """One row-targeted intervention per (condition, scope) batch row."""
        ivs = []
        for i, (cond, scope) in enumerate(rows):
            iv = self.make_iv(unit, cond, declared, scope)
            if iv is not None:
                iv.rows = [i]
                ivs.append(iv)
        return fw.IvGroup(ivs)

    def _row_iv(self, unit: Unit, rows, declared: list[int], i: int) -> Intervention | None:
        """A fresh copy of batch row i's intervention (row i = (condition, scope) of ``rows``)."""
        return self.make_iv(unit, rows[i][0], declared, rows[i][1])

    def probe_fresh(self, unit: Unit, track: str, conds, families, scopes, max_new: int) -> dict:
        """Tracks A and B_masked: the context does not depend on the condition, so the conditions
        x scopes of the item run as rows of one batch, each row under its own row-targeted hook."""
        rows = [(c, s) for c in conds for s in scopes]
        return self._probe_rows(unit, rows, families, max_new, lambda fam: self.context(unit, track, fam, conds[0]))

    def probe_visible(self, unit: Unit, cond: str, families, scopes, max_new: int) -> dict:
        """Track B_visible: each condition reads its own task output, so contexts differ in length
        between conditions; the scopes of one condition share a batch."""
        rows = [(cond, s) for s in scopes]
        return self._probe_rows(unit, rows, families, max_new, lambda fam: self.context(unit, "B_visible", fam, cond))

    def _probe_rows(self, unit: Unit, rows, families, max_new: int, context_for) -> dict:
        """Probe every family on ``rows`` (condition, scope) as one batch; the shared prefix is prefilled
        once and its cache cropped back and reused by every probe family."""
        out: dict = {}
        prefix: Any = None  # the token prefix the cache holds (None: none yet)
        cache = group = None
        for fam in families:
            ctx = context_for(fam)
            if ctx.ids[: ctx.split] != prefix:
                prefix = ctx.ids[: ctx.split]
                group = self._row_group(unit, rows, ctx.declared)
                cache = fw.new_cache(self.model)
                fw.feed_rows(self.model, cache, torch.tensor([prefix] * len(rows)), 0, group, "prefill")
            fw.crop_to(cache, len(prefix))
            tail = ctx.ids[ctx.split:] + self.readout.forced(fam, self.b.tokenizer)
            logits = fw.feed_rows(self.model, cache, torch.tensor([tail] * len(rows)), len(prefix), group, "probe")
            got = self.readout.answer_plain(self.model, cache, logits, len(prefix) + len(tail), fam, max_new, self.eos,
                                            group, functools.partial(self._row_iv, unit, rows, ctx.declared),
                                            self.b.tokenizer)
            for (cond, scope), answer in zip(rows, got):
                out[(cond, fam, scope)] = (ctx.text, ctx.ids, ctx.declared, answer)
        return out

    def probe_delayed(self, unit: Unit, cond: str, families, scopes, max_new: int) -> dict:
        """Tracks B_delayed and C: a later user turn on the task's own (perturbed) cache. The task
        row is repeated once per scope, each copy probed under its own scope."""
        cache, out_ids, _text, _iv = self.task_generation(unit, cond)
        n = len(unit.task.ids) + len(out_ids)
        rows = [(cond, s) for s in scopes]
        if cache.get_seq_length() and getattr(cache, "_owmi_rows", 1) != len(rows):
            cache.batch_repeat_interleave(len(rows))
            cache._owmi_rows = len(rows)
        group = self._row_group(unit, rows, unit.task.declared)
        out = {}
        for fam in families:
            full, tail_ids = self.later_turn(unit, cond, fam)
            fw.crop_to(cache, n)
            fed = tail_ids + self.readout.forced(fam, self.b.tokenizer)
            logits = fw.feed_rows(self.model, cache, torch.tensor([fed] * len(rows)), n, group, "probe")
            got = self.readout.answer_plain(self.model, cache, logits, n + len(fed), fam, max_new, self.eos, group,
                                            lambda i: self.make_iv(unit, cond, unit.task.declared, rows[i][1]),
                                            self.b.tokenizer)
            for (_, scope), answer in zip(rows, got):
                out[(cond, fam, scope)] = (full, unit.task.ids + out_ids + tail_ids, unit.task.declared, answer)
        fw.crop_to(cache, n)
        return out



