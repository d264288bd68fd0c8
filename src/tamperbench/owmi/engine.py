"""Execution of one OWMI unit: (cell, item, seed) through every condition, track, probe and scope.

Why a unit is (cell, item, seed): everything paired shares it. The task prompt, the baseline
answer, the treatment's divergence and the random direction are computed once; each condition's
task prefix is prefilled once under its hook and its KV cache is cropped back and reused by every
probe family and both scopes (pairs sharing a prefix up to the intervened positions reuse it).

Protocol steps (Section 4): baseline pass and answer -> altered pass (JS from baseline, causal
relevance on the gold answer) -> probes per track -> records. The observer reads only the
visible record of the intervention run, with the third-person probe.

Two ways to run a unit: ``batched=True`` (the default, ``batched.py``) runs the conditions of the
unit as rows of one batch; ``batched=False`` runs them one condition at a time with the methods
below -- the plain reference the batched engine is tested against (same records, greedy tokens
identical, JS within float rounding). Models with sliding-window attention run one at a time
(``ragged.supported``).

Impact matching (``calibrate``) has the same two ways (``OwmiSpec.calibration``): each bisection
step's mean JS over the cell's units as one ragged batch, or one teacher-forced forward per unit
(the reference). They agree to float rounding, not bitwise, so the calibration row stores its path.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import torch

from tamperbench.owmi import contexts as cx
from tamperbench.owmi import forward as fw
from tamperbench.owmi.batched import BatchedMixin
from tamperbench.owmi.conditions import (calibrate_norm, concept_direction, random_direction, random_target,
                                         replace_reference, stable_seed)
from tamperbench.owmi.objects import ObjectSpec, Target, resolve
from tamperbench.owmi.operators import Intervention, OperatorSpec
from tamperbench.owmi.probes import corrupted, parse, probe_text, rubric_flag, system_prompt
from tamperbench.owmi.readout import ReadoutMixin

MODEL_CONDITIONS = ("intervention", "sham", "random_unit", "random_matched")
# The baseline's teacher-forced log-probs are kept for reuse by every condition's JS (and every
# calibration step) only while they fit this budget (positions x vocabulary x 4 bytes: ~340
# positions of a 49k vocabulary). Longer sequences stream the baseline alongside each intervened
# pass instead (one more forward, identical numbers), so memory never grows with length x vocab.
BASELINE_KEEP_BYTES = 64 * 2**20


@dataclass
class Cell:
    model: str
    benchmark: str
    obj: ObjectSpec
    op: OperatorSpec


@dataclass
class Unit:
    """Everything one (cell, item, seed) shares across its conditions."""

    cell: Cell
    item: Any  # BenchItem
    index: int  # item index within the benchmark (cycles the concept)
    seed: int
    target: Target
    rtarget: Target
    concept: str | None
    direction: torch.Tensor | None
    reference: torch.Tensor | None
    u: torch.Tensor
    task: cx.Context
    base_ids: list[int]
    norm_unit: float = 0.0
    eta: float | None = None
    match: tuple[float, float] | None = None
    effects: dict[str, dict] = field(default_factory=dict)
    gens: dict[str, tuple] = field(default_factory=dict)
    base_chunks: list | None = None  # baseline teacher-forced log-probs, shared by every condition's JS
    # (None when over BASELINE_KEEP_BYTES: then streamed alongside each intervened pass)
    base_answer_lp: float | None = None
    task_rows: Any = None  # batched engine: the task answered under every condition (ragged.Rows)
    system: str | None = None  # the system message of every context built for this unit (None: none given)


class Engine(BatchedMixin, ReadoutMixin):
    """One loaded model (and its observers) running units of a spec."""

    def __init__(self, backend, spec, observers: list[tuple[str, Any]] | None = None, batched: bool = True):
        from tamperbench.owmi.ragged import PrefixCache, supported

        self.b, self.spec, self.model = backend, spec, backend.model
        self.system = system_prompt()
        self.n_layers = int(self.model.config.num_hidden_layers)
        self.vocab = int(self.model.config.vocab_size)
        self.eos = set(backend.eos_ids)
        self.observers = observers or []
        self._base: dict[tuple[int, ...], tuple[list[int], str]] = {}
        self._dirs: dict[tuple, torch.Tensor] = {}
        self.batched = batched and supported(self.model)
        self.prefix = PrefixCache()
        # the last calibration's rows per batch and why (memory.BatchChoice; None: none batched yet)
        self.calibration_batch: Any = None

    # ------------------------------------------------------------------ preparation
    def frame_system(self, frame: str) -> str | None:
        """The system message of a context frame (``OwmiSpec.frame``): the shared introspection
        prompt (Section 6.1), or none for Track C's neutral frame -- Track C asks for a reflection
        "with no intervention cue and no introspective question" (Section 3.3), and a system prompt
        about introspecting on one's own processing is such a cue. With none given, the chat
        template's own default (if any) applies; the record's prompt text shows it."""
        return None if frame == "neutral" else self.system

    def baseline(self, item, task: cx.Context) -> tuple[list[int], str]:
        """The unaltered greedy task answer (teacher-forcing target of the JS divergence), per
        task context (a frame's system message changes the context, hence the answer)."""
        key = tuple(task.ids)
        if key not in self._base:
            cache = fw.new_cache(self.model)
            logits = fw.feed(self.model, cache, task.ids, 0, None, "prefill")
            ids, _ = fw.greedy(self.model, cache, logits, len(task.ids), self.spec.task_max_new_tokens, self.eos,
                               None, "decode")
            self._base[key] = (ids, self.b.tokenizer.decode(ids, skip_special_tokens=True))
        return self._base[key]

    def prepare(self, cell: Cell, item, index: int, seed: int, frame: str = "shared") -> Unit:
        """The unit of (cell, item, seed) in context ``frame``: every context built for it carries
        that frame's system message (``frame_system``)."""
        target = resolve(self.model, cell.obj)
        rtarget = random_target(self.model, target)
        concept = direction = reference = None
        if cell.op.name == "add":
            cycle = self.spec.concept_cycle
            concept = cycle[(index + seed) % len(cycle)]
            key = (target.spec.label, concept)
            if key not in self._dirs:
                self._dirs[key] = concept_direction(self.b, target, concept)
            direction = self._dirs[key]
        if cell.op.name == "replace":
            reference = replace_reference(self.b, target, self.spec, index, seed)
        u = random_direction(rtarget.dim, stable_seed(seed, item.id, cell.obj.label, cell.op.name, cell.op.dose))
        system = self.frame_system(frame)
        task = cx.task_context(self.b, item.prompt_text(), system, self.spec.positions)
        base_ids, _ = self.baseline(item, task)
        unit = Unit(cell, item, index, seed, target, rtarget, concept, direction, reference, u, task, base_ids,
                    system=system)
        unit.effects["intervention"] = (self.effects_rows(unit, ["intervention"])["intervention"] if self.batched
                                        else self.effect(unit, "intervention"))
        unit.norm_unit = unit.effects["intervention"]["delta_norm"] or 1.0
        return unit

    def make_iv(self, unit: Unit, cond: str, declared: list[int], scope: str = "active") -> Intervention | None:
        op, kw = unit.cell.op, dict(positions=declared, when=self.spec.when, scope=scope, seed=unit.seed)
        if cond == "intervention":
            return Intervention(unit.target, op.name, op.dose, direction=unit.direction, reference=unit.reference, **kw)
        if cond == "sham":
            return Intervention(unit.target, op.name, op.dose, direction=unit.direction, reference=unit.reference,
                                identity=True, **kw)
        if cond == "random_unit":
            return Intervention(unit.rtarget, "add", unit.norm_unit, direction=unit.u, **kw)
        if cond == "random_matched":
            return Intervention(unit.rtarget, "add", unit.eta if unit.eta is not None else unit.norm_unit,
                                direction=unit.u, **kw)
        return None

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

    def keep_baseline(self, unit: Unit) -> None:
        """The baseline's teacher-forced chunks, kept for every JS against it when they fit."""
        ids, start = unit.task.ids + unit.base_ids, min(unit.task.declared) if unit.task.declared else 0
        if unit.base_chunks is None and (len(ids) - start) * self.vocab * 4 <= BASELINE_KEEP_BYTES:
            unit.base_chunks = list(fw.distributions(self.model, ids, start, None, self.spec.js_chunk))

    def calibration_path(self) -> str:
        """Which ``mean_js`` the bisection runs: ``batched`` (the cell's units as rows of one ragged
        forward per eta, ``BatchedMixin.mean_js_rows``) or ``sequential`` (one teacher-forced
        forward per unit, the reference). The two agree to float rounding, not bitwise (padded
        batched kernels), so the path that ran is stored with the calibration."""
        return "batched" if self.batched and self.spec.calibration == "batched" else "sequential"

    def calibrate(self, units: list[Unit]) -> tuple[float, float, float, list]:
        """Impact matching over the cell's units: one eta for the cell (Eq. 7 matches means)."""
        for u in units:
            self.keep_baseline(u)
        target = sum(u.effects["intervention"]["js_mean"] for u in units) / len(units)
        if self.calibration_path() == "batched":
            return self._bisect(units, target, lambda eta: self.mean_js_rows(units, eta))

        def mean_js(eta: float) -> float:
            tot = 0.0
            for u in units:
                u.eta = eta
                iv = self.make_iv(u, "random_matched", u.task.declared)
                assert iv is not None  # random_matched is a model condition
                tot += fw.js_divergence(self.model, u.task.ids + u.base_ids, min(u.task.declared or [0]), iv,
                                        chunk=self.spec.js_chunk, baseline=u.base_chunks)[0]
            return tot / len(units)

        return self._bisect(units, target, mean_js)

    def _bisect(self, units: list[Unit], target: float, mean_js) -> tuple[float, float, float, list]:
        start = sum(u.norm_unit for u in units) / len(units)
        eta, achieved, trace = calibrate_norm(mean_js, target, start, self.spec.calibration_steps)
        for u in units:
            u.eta, u.match = eta, (target, achieved)
        return eta, target, achieved, trace

    # ------------------------------------------------------------------ probing
    def _generate(self, cache, logits, start: int, iv, max_new: int) -> tuple[list[int], str, str]:
        ids, fin = fw.greedy(self.model, cache, logits, start, max_new, self.eos, iv, "probe")
        return ids, self.b.tokenizer.decode(ids, skip_special_tokens=True), fin

    def task_generation(self, unit: Unit, cond: str):
        """The task answered under the condition's hook, cache kept for the delayed tracks."""
        if self.batched:
            self.task_rows(unit)
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

    def _context(self, unit: Unit, track: str, family: str, cond: str) -> cx.Context:
        text = probe_text(family, person="first", n_layers=self.n_layers)
        task_text = unit.item.prompt_text()
        if track == "A":
            return cx.track_a(self.b, task_text, text, unit.system, self.spec.positions)
        if track == "B_visible":
            return cx.track_b_visible(self.b, task_text, self.task_generation(unit, cond)[2], text, unit.system,
                                      self.spec.positions)
        return cx.track_b_masked(self.b, text, unit.system, self.spec.positions)

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
        return self._probe_rows(unit, rows, families, max_new, lambda fam: self._context(unit, track, fam, conds[0]))

    def probe_visible(self, unit: Unit, cond: str, families, scopes, max_new: int) -> dict:
        """Track B_visible: each condition reads its own task output, so contexts differ in length
        between conditions; the scopes of one condition share a batch."""
        rows = [(cond, s) for s in scopes]
        return self._probe_rows(unit, rows, families, max_new, lambda fam: self._context(unit, "B_visible", fam, cond))

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
            tail = ctx.ids[ctx.split:] + self.forced(fam, self.b.tokenizer)
            logits = fw.feed_rows(self.model, cache, torch.tensor([tail] * len(rows)), len(prefix), group, "probe")
            got = self.answer_plain(self.model, cache, logits, len(prefix) + len(tail), fam, max_new, self.eos, group,
                                    functools.partial(self._row_iv, unit, rows, ctx.declared), self.b.tokenizer)
            for (cond, scope), answer in zip(rows, got):
                out[(cond, fam, scope)] = (ctx.text, ctx.ids, ctx.declared, answer)
        return out

    def probe_delayed(self, unit: Unit, cond: str, families, scopes, max_new: int) -> dict:
        """Tracks B_delayed and C: a later user turn on the task's own (perturbed) cache. The task
        row is repeated once per scope, each copy probed under its own scope."""
        cache, out_ids, out_text, _iv = self.task_generation(unit, cond)
        n = len(unit.task.ids) + len(out_ids)
        rows = [(cond, s) for s in scopes]
        if cache.get_seq_length() and getattr(cache, "_owmi_rows", 1) != len(rows):
            cache.batch_repeat_interleave(len(rows))
            cache._owmi_rows = len(rows)
        group = self._row_group(unit, rows, unit.task.declared)
        out = {}
        for fam in families:
            person_text = probe_text(fam, person="first", n_layers=self.n_layers)
            full, tail = cx.later_turn(self.b, unit.item.prompt_text(), out_text, person_text, unit.system)
            end_text = self.b.tokenizer.decode([out_ids[-1]]) if out_ids and out_ids[-1] in self.eos else ""
            if end_text and tail.startswith(end_text):
                tail = tail[len(end_text):]
            tail_ids = self.b.tokenizer(tail, add_special_tokens=False)["input_ids"]
            fw.crop_to(cache, n)
            fed = tail_ids + self.forced(fam, self.b.tokenizer)
            logits = fw.feed_rows(self.model, cache, torch.tensor([fed] * len(rows)), n, group, "probe")
            got = self.answer_plain(self.model, cache, logits, n + len(fed), fam, max_new, self.eos, group,
                                    lambda i: self.make_iv(unit, cond, unit.task.declared, rows[i][1]), self.b.tokenizer)
            for (_, scope), answer in zip(rows, got):
                out[(cond, fam, scope)] = (full, unit.task.ids + out_ids + tail_ids, unit.task.declared, answer)
        fw.crop_to(cache, n)
        return out

    def observer_record(self, unit: Unit, track: str) -> str:
        """What a text-only observer sees of the intervention run on ``track``."""
        task_text = unit.item.prompt_text()
        if track == "A":
            return f"Task given to the model:\n{task_text}"
        if track == "B_masked":
            return "(the record is withheld)"
        return f"Task given to the model:\n{task_text}\n\nThe model's answer:\n{self.task_generation(unit, 'intervention')[2]}"

    def observe(self, backend, unit: Unit, track: str, family: str, max_new: int) -> tuple:
        """Text-only observer: the visible record of the intervention run, third-person probe."""
        record = self.observer_record(unit, track)
        text3 = probe_text(family, person="third", n_layers=self.n_layers)
        msgs = cx.observer_prompt(record, text3)
        ids = backend.chat_ids(msgs, system=unit.system)
        fed = ids + self.forced(family, backend.tokenizer)
        cache = fw.new_cache(backend.model)
        logits = fw.feed(backend.model, cache, fed, 0, None, "prefill")[-1:]
        answer = self.answer_plain(backend.model, cache, logits, len(fed), family, max_new, set(backend.eos_ids), None,
                                   lambda i: None, backend.tokenizer)[0]
        return backend.chat_text(msgs, system=unit.system), ids, text3, answer

    def release(self, unit: Unit) -> None:
        unit.gens.clear()
        unit.task_rows = None


def parsed_fields(family: str, response: str, n_layers: int) -> dict:
    got = parse(family, response, n_layers=n_layers)
    if family == "spontaneous":
        got["rubric_flag"] = rubric_flag(response)
    got["corrupted"] = corrupted(response)
    return got
