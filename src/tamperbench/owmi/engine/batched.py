"""The batched engine: the conditions of an item as rows of one batch.

Why: the one-at-a-time engine (``reference.py``, kept as the reference the equivalence test compares
against) answers the task once per condition, probes the delayed and visible tracks once per
condition, asks the observer once per probe family and teacher-forces one condition at a time.
Here each of those is one batch (``ragged.Rows``): the model conditions of the spec (intervention,
sham, random_unit, random_matched), times the scopes where the probe differs by scope, each row
under its own row-targeted hook, finished rows compacted away.

Probe families: on tracks A, B_masked and B_visible every family of the track is a block of rows of
the same batch (the probes differ in length: ragged rows), so a track's probes cost one prefill of
their tails and one decoding loop (or, under ``choice``, one packed forward of every row's option
trie), not one per family; the observer's families likewise. Families run together as far as memory
allows (``_family_batches``, models/memory.py).

Shared prefixes: the tokens before the first declared position (system prompt and turn header)
are identical in every row and no hook alters them, so they are prefilled once, unhooked, and the
one-row cache is forked into every batch that starts with them (``ragged.PrefixCache``: the same
header serves every item and track). The task's cache, generated under each condition's hook,
is kept per condition and copied into every probe family of the delayed tracks.

Across units: the layers below the hook are kept by the tokens fed (``lower.py``: every cell and seed of an
item feeds the same contexts there), the baseline's log-probs per task, and the sham's probe answers per
context (its hook writes nothing back, so it is not run again once an earlier unit ran it).

Batch composition never depends on what a resumed run still has to do (always every model
condition of the spec, in spec order), so a resumed group is computed by the same batch rows as
in an uninterrupted run.

Batch sizes: the model-condition batches hold conditions x scopes (or probe families) rows, a few
fixed by the spec, whatever the data. The one batch that grows with the data is Eq. 7's calibration
(a cell's units as rows, :meth:`mean_js_rows`): it is sized from its own row lengths against the
memory free (models/memory.py ``ragged_rows``) -- every unit at once whenever they fit, as before;
else consecutive groups of units that fit -- and the choice is kept in ``calibration_batch``.
"""

from __future__ import annotations

from typing import Any

import torch

from tamperbench.owmi.engine import contexts as cx
from tamperbench.owmi.engine import forward as fw
from tamperbench.owmi.engine.base import Batch, Engine
from tamperbench.owmi.engine.calibration_rows import BASE, CalibrationRows
from tamperbench.owmi.engine.calibration_rows import _positions as _positions  # where it lived
from tamperbench.owmi.protocol.probes import probe_text
BASE_MEMO = 16  # tasks whose baseline log-probs (and gold answer log-probability) the engine keeps
SHAM_MEMO = 256  # the sham's probe answers kept by context (probe_rows)
OBSERVER_MEMO = 64  # observer batches kept for later units reading the same record (owmi/engine/batched.py observe_rows)


class BatchedEngine(CalibrationRows, Engine):
    """The conditions of a unit as rows of one batch (the production engine)."""

    kind = "batched"
    calibration_paths = ("batched", "sequential")  # batched: the cell's units as rows (mean_js_rows)

    def __init__(self, backend, spec, observers: list[tuple[str, Any]] | None = None):
        super().__init__(backend, spec, observers)
        from tamperbench.owmi.engine.lower import LowerStore
        from tamperbench.owmi.engine.ragged import PrefixCache

        # the layers below the hook, kept across batches by the tokens fed (lower.py): every cell and seed of an
        # item feeds the same contexts there
        self.prefix = PrefixCache(store=LowerStore())
        # the last calibration's rows per batch and why (memory.BatchChoice; None: none batched yet)
        self.calibration_batch: Any = None
        self._observed: dict = {}  # observer batches by the record they read (observe_rows)
        self._base_lp: dict = {}  # (task + baseline answer ids, start) -> the baseline's log-probs (keep_baseline)
        self._base_answer: dict[tuple, float] = {}
        self._sham: dict[tuple, Any] = {}  # (track, family, context ids, answer budget) -> the sham's answer  # task + gold ids -> the baseline's log p(gold) (_answer_rows)

    # ------------------------------------------------------------------ what the runner asks
    def effects(self, unit, conds: list[str]) -> dict[str, dict]:
        return self.effects_rows(unit, conds)

    def fill_effects(self, unit, need: set[str]) -> None:
        """Every model condition of the spec in one batch whenever any is needed (the same batch
        rows whatever a resumed run still lacks)."""
        conds = [c for c in self.model_conditions() if c not in unit.effects]
        if conds and need & set(conds):
            unit.effects.update(self.effects_rows(unit, conds))

    def group(self, d: dict) -> tuple:
        if d["condition"] == "observer":
            return (d["track"], "observer", d["observer_tier"])
        return (d["track"], "rows")

    def probe_batches(self, unit, track: str) -> list[Batch]:
        fams, max_new = self.track_axes(track)
        if track in ("B_delayed", "C"):
            return [((track, "rows"), lambda: self.probe_delayed_rows(unit, fams, self.spec.scopes, max_new))]
        return [((track, "rows"), lambda: self.probe_rows(unit, track, fams, self.spec.scopes, max_new))]

    def observer_batches(self, unit, track: str, tier: int, backend) -> list[Batch]:
        fams, max_new = self.track_axes(track)
        return [((track, "observer", tier), lambda: self.observe_rows(backend, unit, track, fams, max_new))]

    def mean_js(self, units, eta: float) -> float:
        if self.calibration_path() == "batched":
            return self.mean_js_rows(units, eta)
        return self.mean_js_sequential(units, eta)

    def task_answer(self, unit, cond: str) -> str:
        self.task_rows(unit)
        return unit.gens[cond][2]

    def _decode(self, ids: list[int]) -> str:
        return self.b.tokenizer.decode(ids, skip_special_tokens=True)

    # ------------------------------------------------------------------ the task under every condition
    def task_rows(self, unit):
        """Every model condition answers the task in one batch (one row each, its own hook); the
        batch is kept: each row's cache holds its task prompt and whole answer (holes after a row
        finished), what the delayed tracks and the visible track build on."""
        if unit.task_rows is None:
            conds, ids = self.model_conditions(), unit.task.ids
            first = min(unit.task.declared) if unit.task.declared else len(ids)
            rows, fork = self.prefix.rows(self.model, [ids] * len(conds), first, conds)
            ivs = {c: self.make_iv(unit, c, unit.task.declared) for c in conds}
            for c in conds:
                rows.attach(c, ivs[c])
            logits = rows.extend([ids[fork:]] * len(conds), "prefill")[:, -1]
            got = rows.greedy(logits, self.spec.task_max_new_tokens, self.eos, "decode", keep=True)
            for c in conds:
                unit.gens[c] = (None, got[c][0], self._decode(got[c][0]), ivs[c])
            unit.task_rows = rows
        return unit.task_rows

    # ------------------------------------------------------------------ probes
    def probe_rows(self, unit, track: str, families, scopes, max_new: int) -> dict:
        """Tracks A, B_masked and B_visible: rows (condition, scope), each row's context from
        ``_context`` (B_visible: its condition's own task output, so rows differ in length). The
        part before the probe is fed once per distinct prefix and condition -- the scopes differ only
        from the probe on (phase ``probe``), so a condition's prefill is one row whatever the scopes --
        and copied for each (scope, family).

        The sham's rows are the unhooked model's answers to its contexts (its hook writes nothing back in any
        phase): kept by context (``_sham``), so a later unit whose sham reads the same contexts (every cell and
        seed of an item on Tracks A and B_masked) takes them instead of running the rows again."""
        if track == "B_visible":
            self.task_rows(unit)
        every = self.model_conditions()
        ctxs = {(f, c): self.context(unit, track, f, c) for f in families for c in every}
        memo = {f: (track, f, tuple(ctxs[(f, "sham")].ids), max_new) for f in families} if "sham" in every else {}
        known = bool(memo) and all(k in self._sham for k in memo.values())
        conds = [c for c in every if not (known and c == "sham")]
        defs = [(c, s) for c in conds for s in scopes]
        twins = self._twins(defs)
        groups: dict[tuple, list[str]] = {}  # the conditions' prefixes -> the families sharing them
        for f in families:
            groups.setdefault(tuple(tuple(ctxs[(f, c)].ids[: ctxs[(f, c)].split]) for c in conds), []).append(f)
        out = {}
        for pre, fams in groups.items():
            f0 = fams[0]
            first = min((min(ctxs[(f0, c)].declared) for c in conds if ctxs[(f0, c)].declared),
                        default=min(map(len, pre)))
            base, fork = self.prefix.rows(self.model, [list(p) for p in pre], first, conds)
            for c in conds:  # the prefill hook: the scope plays no part before the probe
                base.attach(c, self.make_iv(unit, c, ctxs[(f0, c)].declared, scopes[0]))
            base.extend([p[fork:] for p in pre], "prefill")
            run = [d for d in defs if d not in twins]
            of = [conds.index(c) for c, _ in run]  # each (condition, scope) row's prefill row
            for part in self._family_batches(fams, len(run), max(len(p) for p in pre)):
                rids = [(c, s, f) for f in part for c, s in run]
                rows = base.select([i for _ in part for i in of], rids)
                for c, s, f in rids:  # a fresh copy of the row's hook (the probe phase keeps no state)
                    rows.attach((c, s, f), self.make_iv(unit, c, ctxs[(f, c)].declared, s))
                tails = [ctxs[(f, c)].ids[ctxs[(f, c)].split:] + self.readout.forced(f, self.b.tokenizer) for c, s, f in rids]
                logits = rows.extend(tails, "probe")[:, -1]
                got = self.readout.answer_rows(rows, logits, {rid: rid[2] for rid in rids}, max_new, self.eos,
                                       lambda rid: self.make_iv(unit, rid[0], ctxs[(rid[2], rid[0])].declared, rid[1]),
                                       self.b.tokenizer)
                for c, s in defs:
                    for f in part:
                        ctx = ctxs[(f, c)]
                        out[(c, f, s)] = (ctx.text, ctx.ids, ctx.declared, got[(*twins.get((c, s), (c, s)), f)])
        for f, key in memo.items():  # the sham's answers: kept from this batch, or taken from an earlier one
            if known:
                ctx = ctxs[(f, "sham")]
                out.update({("sham", f, sc): (ctx.text, ctx.ids, ctx.declared, self._sham[key]) for sc in scopes})
            else:
                while len(self._sham) >= SHAM_MEMO:
                    self._sham.pop(next(iter(self._sham)))
                self._sham[key] = out[("sham", f, scopes[0])][3]
        return out

    @staticmethod
    def _twins(defs: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, str]]:
        """Rows (condition, scope) computed by another row: the sham's hook writes nothing back in any
        phase, so its rows under every scope are the same computation; its first scope's row is run and
        read for the others."""
        shams = [d for d in defs if d[0] == "sham"]
        return {d: shams[0] for d in shams[1:]}

    def _family_batches(self, fams: list[str], per_family: int, length: int) -> list[list[str]]:
        """Probe families run together, ``per_family`` rows each, as many per batch as memory allows
        (models/memory.py ``ragged_rows`` at the context's length plus the answer budget): every family of a
        track in one batch whenever they fit."""
        from tamperbench.models.memory import ragged_rows

        budget = length + max(self.spec.probe_max_new_tokens, 64)
        fit = ragged_rows(self.model, next(self.model.parameters()).device, length=budget,
                          limit=per_family * len(fams), block_tokens=self.spec.js_chunk).rows
        k = max(1, fit // max(1, per_family))
        return [fams[i: i + k] for i in range(0, len(fams), k)]

    def probe_delayed_rows(self, unit, families, scopes, max_new: int) -> dict:
        """Tracks B_delayed and C: a later user turn on each condition's own task cache; rows
        (condition, scope), the task batch copied once per family (it stays intact)."""
        task = self.task_rows(unit)
        conds = self.model_conditions()
        defs = [(c, s) for c in conds for s in scopes]
        twins = self._twins(defs)
        run = [d for d in defs if d not in twins]
        order = [task.rids.index(c) for c, _ in run]
        out = {}
        for fam in families:
            tails = {c: self.later_turn(unit, c, fam) for c in conds}
            rows = task.select(order, run)
            for c, s in run:
                rows.attach((c, s), self.make_iv(unit, c, unit.task.declared, s))
            forced = self.readout.forced(fam, self.b.tokenizer)
            logits = rows.extend([tails[c][1] + forced for c, _ in run], "probe")[:, -1]
            got = self.readout.answer_rows(rows, logits, fam, max_new, self.eos,
                                   lambda rid: self.make_iv(unit, rid[0], unit.task.declared, rid[1]), self.b.tokenizer)
            for c, s in defs:
                out[(c, fam, s)] = (tails[c][0], unit.task.ids + unit.gens[c][1] + tails[c][1], unit.task.declared,
                                    got[twins.get((c, s), (c, s))])
        return out

    def observe_rows(self, backend, unit, track: str, families, max_new: int) -> dict:
        """The text-only observer, every probe family of a track as one batch (no hooks); the
        record they share is prefilled once. Returns family -> (text, ids, probe, response)."""
        from tamperbench.owmi.engine.ragged import supported

        if not supported(backend.model):
            return {f: self.observe(backend, unit, track, f, max_new) for f in families}
        record = self.observer_record(unit, track)
        msgs = {f: cx.observer_prompt(record, probe_text(f, person="third", n_layers=self.n_layers)) for f in families}
        ids = {f: backend.chat_ids(msgs[f], system=unit.system) for f in families}
        fams = list(families)
        # the observer reads text only: units whose visible record is the same text (every cell, dose and
        # seed of an item on Track A) get the very batch computed once, not an equal one recomputed
        memo = self._observed
        key = (id(backend.model), tuple(tuple(ids[f]) for f in fams), max_new)
        if key in memo:
            return memo[key]
        while len(memo) >= OBSERVER_MEMO:
            memo.pop(next(iter(memo)))
        memo[key] = self._observe_batch(backend, unit, msgs, ids, fams, max_new)
        return memo[key]

    def _observe_batch(self, backend, unit, msgs: dict, ids: dict, fams: list, max_new: int) -> dict:
        rows, fork = self.prefix.rows(backend.model, [ids[f] for f in fams], 1 << 30, fams)
        # every family in one batch: under choice each row reads its own family's closed set
        logits = rows.extend([ids[f][fork:] + self.readout.forced(f, backend.tokenizer) for f in fams], "probe")[:, -1]
        got = self.readout.answer_rows(rows, logits, {f: f for f in fams}, max_new, set(backend.eos_ids), lambda rid: None,
                               backend.tokenizer)
        return {f: (backend.chat_text(msgs[f], system=unit.system), ids[f],
                    probe_text(f, person="third", n_layers=self.n_layers), got[f]) for f in fams}

    # ------------------------------------------------------------------ teacher-forced effects
    def keep_baseline(self, unit) -> None:
        """The baseline's teacher-forced log-probs, kept per task (every cell and seed of an item reads the same):
        those an earlier unit's batch computed (``effects_rows``), else one forward."""
        key = self._base_key(unit)
        if unit.base_chunks is None and key is not None:
            if key not in self._base_lp:
                ids, start = key
                self._keep(key, list(fw.distributions(self.model, ids, start, None, self.spec.js_chunk)))
            unit.base_chunks = self._base_lp[key]

    def _base_key(self, unit) -> tuple | None:
        """What the baseline's log-probs are kept under (None: over ``BASELINE_KEEP_BYTES``, not kept)."""
        from tamperbench.owmi.engine.unit import BASELINE_KEEP_BYTES

        ids, start = unit.task.ids + unit.base_ids, min(unit.task.declared) if unit.task.declared else 0
        return (tuple(ids), start) if (len(ids) - start) * self.vocab * 4 <= BASELINE_KEEP_BYTES else None

    def _keep(self, key: tuple, chunks: list) -> None:
        while len(self._base_lp) >= BASE_MEMO:
            self._base_lp.pop(next(iter(self._base_lp)))
        self._base_lp[key] = chunks

    def effects_rows(self, unit, conds: list[str]) -> dict[str, dict]:
        """JS divergence and causal relevance of ``conds`` in one teacher-forced batch against the baseline's
        log-probs: those kept for this task (``keep_baseline``), else an unhooked first row of the batch
        (then kept, where they fit). The sham's hook writes nothing back, so its row is the baseline's
        computation: it is not run again, its JS is exactly 0 and its answer log-probability the
        baseline's. Positions are fed ``js_chunk // rows`` at a time: one block stays js_chunk x vocabulary."""
        from tamperbench.owmi.engine.calibration_rows import _positions

        key = self._base_key(unit)
        if unit.base_chunks is None and key in self._base_lp:
            unit.base_chunks = self._base_lp[key]
        kept = unit.base_chunks
        run = [c for c in conds if c != "sham"]
        rids = run if kept is not None else [BASE, *run]
        ids = unit.task.ids + unit.base_ids
        start = min(unit.task.declared) if unit.task.declared else 0
        ivs = {c: self.make_iv(unit, c, unit.task.declared) for c in conds}
        total, peak, n = torch.zeros(len(run), dtype=torch.float64), torch.zeros(len(run)), len(ids) - start
        fed: list = []  # the baseline row's log-probs, chunk by chunk
        if run:
            rows, fork = self.prefix.rows(self.model, [ids] * len(rids), start, rids)
            for c in run:
                rows.attach(c, ivs[c])
            step = max(1, self.spec.js_chunk // len(rids))
            for lo in range(fork, len(ids), step):
                hi = min(lo + step, len(ids))
                keep = hi - max(start, lo)
                logits = rows.extend([ids[lo:hi]] * len(rids), "prefill", keep=max(keep, 1))
                if keep <= 0:
                    continue
                lp = torch.log_softmax(logits, dim=-1)
                if kept is None:
                    fed.append(lp[0].clone())
                base = lp[:1] if kept is None else _positions(kept, hi - keep - start, hi - start)[None]
                js = fw.js_rows(base, lp[len(rids) - len(run):])  # (conditions run, keep)
                total += js.double().sum(1)
                peak = torch.maximum(peak, js.max(1).values)
                del logits, lp, js
        if kept is None and key is not None and fed:
            self._keep(key, fed)
            unit.base_chunks = fed
        got = {c: (float(total[i] / n) if n else 0.0, float(peak[i])) for i, c in enumerate(run)}
        out = {c: dict(js_mean=got.get(c, (0.0, 0.0))[0], js_max=got.get(c, (0.0, 0.0))[1], js_positions=n,
                       delta_norm=ivs[c].mean_delta_norm) for c in conds}
        if unit.item.answer:
            lps = self._answer_rows(unit, conds)
            unit.base_answer_lp = lps[BASE]
            for c in conds:
                out[c].update(answer_logprob_base=lps[BASE], answer_logprob_altered=lps[c],
                              causal_effect=lps[BASE] - lps[c])
        return out

    def _answer_rows(self, unit, conds: list[str]) -> dict[str, float]:
        """Teacher-forced log p(gold | task) for the baseline and every condition, one forward; the
        baseline's kept per task and gold answer, the sham's the baseline's."""
        gold = self.b.tokenizer(unit.item.answer, add_special_tokens=False)["input_ids"]
        ids = unit.task.ids + list(gold)
        known = self._base_answer.get(tuple(ids))
        rids = [c for c in conds if c != "sham"] if known is not None else [BASE, *[c for c in conds if c != "sham"]]
        got: dict[str, float] = {}
        if rids:
            k = len(unit.task.ids) - 1
            start = min(unit.task.declared) if unit.task.declared else 0
            rows, fork = self.prefix.rows(self.model, [ids] * len(rids), min(start, k), rids)
            for c in rids:
                if c != BASE:
                    rows.attach(c, self.make_iv(unit, c, unit.task.declared))
            lp = torch.log_softmax(rows.extend([ids[fork:]] * len(rids), "prefill", keep=len(ids) - k), dim=-1)
            targets = torch.tensor(ids[k + 1:])
            lps = lp[:, : len(targets)].gather(2, targets[None, :, None].expand(len(rids), -1, 1))[..., 0]
            got = {r: float(lps[i].sum()) for i, r in enumerate(rids)}
        if known is None:
            while len(self._base_answer) >= BASE_MEMO:
                self._base_answer.pop(next(iter(self._base_answer)))
            known = self._base_answer[tuple(ids)] = got[BASE]
        return {BASE: known, **got, **({"sham": known} if "sham" in conds else {})}
