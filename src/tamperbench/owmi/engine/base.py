"""What both OWMI engines share: preparing a unit, its interventions, impact matching, contexts, records.

Two engines run a unit -- (cell, item, seed) through every condition, track, probe and scope --
and they differ only in how they batch the work:

* :class:`~tamperbench.owmi.engine.batched.BatchedEngine` runs the conditions of a unit as rows of
  one ragged batch (the production engine);
* :class:`~tamperbench.owmi.engine.reference.ReferenceEngine` runs them one condition at a time: the
  plain reference the batched engine is tested against (same records, greedy tokens identical, JS
  within float rounding), and the engine of models with sliding-window attention (``ragged.supported``).

This module is the engine's interface to the worker, so a reader of ``owmi/run`` opens one engine
module per unit. (Before any forward the run calls the package's own functions, ``engine/__init__.py``:
``check``, a spec against one model, and ``engine_for``, one engine per loaded model.) Per work unit
the worker asks the engine it picked: :meth:`Engine.prepare` each (item, seed) in its context frame
(:meth:`Engine.frame_system`), :meth:`Engine.calibrate` the cell (impact matching; the path that ran,
:meth:`Engine.calibration_path`), :meth:`Engine.records` (the unit's records, batch by batch, built
from the engine-specific :meth:`Engine.fill_effects`, :meth:`Engine.group`,
:meth:`Engine.probe_batches` and :meth:`Engine.observer_batches`), and :meth:`Engine.release`. Each
batch is committed in one transaction.

Protocol steps (Section 4): baseline pass and answer -> altered pass (JS from baseline, causal
relevance on the gold answer) -> probes per track -> records. The observer reads only the visible
record of the intervention run, with the third-person probe.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tamperbench.owmi.engine import contexts as cx
from tamperbench.owmi.engine import forward as fw
from tamperbench.owmi.engine.conditions import (calibrate_norm, concept_direction, random_direction, random_target,
                                                reference_activation, replace_reference, stable_seed)
from tamperbench.owmi.engine.objects import resolve
from tamperbench.owmi.engine.operators import Intervention
from tamperbench.owmi.engine.readout import Readout
from tamperbench.owmi.engine.unit import BASELINE_KEEP_BYTES, Cell, Unit
from tamperbench.owmi.protocol.probes import probe_text, system_prompt

# A batch of records: its group (the runner's transaction) and the call that computes it.
Batch = tuple[tuple, Callable[[], dict]]


class Engine(abc.ABC):
    """One loaded model (and its observers) running units of a spec; subclassed once per engine."""

    kind = "engine"

    def __init__(self, backend, spec, observers: list[tuple[str, Any]] | None = None):
        from tamperbench.owmi.engine.ragged import PrefixCache

        self.b, self.spec, self.model = backend, spec, backend.model
        self.system = system_prompt()
        self.n_layers = int(self.model.config.num_hidden_layers)
        self.vocab = int(self.model.config.vocab_size)
        self.eos = set(backend.eos_ids)
        self.observers = observers or []
        self.readout = Readout(spec, self.n_layers)
        self._base: dict[tuple[int, ...], tuple[list[int], str]] = {}
        self._dirs: dict[tuple, torch.Tensor] = {}
        self._refs: dict[str, torch.Tensor] = {}  # object label -> reference_activation (replace's reference)
        self.prefix = PrefixCache()

    # ------------------------------------------------------------------ what each engine computes its way
    def model_conditions(self) -> list[str]:
        return [c for c in self.spec.conditions if c != "observer"]

    @abc.abstractmethod
    def effects(self, unit: Unit, conds: list[str]) -> dict[str, dict]:
        """Teacher-forced JS and causal relevance of ``conds`` (engine-specific batching)."""

    @abc.abstractmethod
    def fill_effects(self, unit: Unit, need: set[str]) -> None:
        """The teacher-forced effects of the model conditions in ``need`` into ``unit.effects``."""

    @abc.abstractmethod
    def group(self, d: dict) -> tuple:
        """The batch that computes a record of design coordinates ``d`` (and the transaction that commits it)."""

    @abc.abstractmethod
    def probe_batches(self, unit: Unit, track: str) -> list[Batch]:
        """The batches of ``track``'s model-condition records; each computes
        (condition, family, scope) -> (prompt text, prompt ids, declared, answer)."""

    @abc.abstractmethod
    def observer_batches(self, unit: Unit, track: str, tier: int, backend) -> list[Batch]:
        """The batches of ``track``'s observer records read by ``backend`` (tier 1: the model itself);
        each computes family -> (prompt text, prompt ids, third-person probe, answer)."""

    calibration_paths: tuple[str, ...] = ("sequential",)  # the ``mean_js`` paths this engine can run

    def calibration_path(self) -> str:
        """Which ``mean_js`` impact matching runs (stored with the calibration row): the spec's
        ``calibration`` where this engine runs it, else ``sequential`` (one teacher-forced forward per
        unit, the reference). The batched engine also runs ``batched`` (the cell's units as rows of
        one ragged forward per eta); the two agree to float rounding, not bitwise (padded batched
        kernels), so the path that ran is stored with the calibration."""
        return self.spec.calibration if self.spec.calibration in self.calibration_paths else "sequential"

    def mean_js(self, units: list[Unit], eta: float) -> float:
        """Eq. 7's E[D(eta)] over the cell's units under ``random_matched`` at norm ``eta``."""
        return self.mean_js_sequential(units, eta)

    def records(self, unit: Unit, keys: list, provenance_id: str,
                on_tokens: Callable[[int], None] | None = None) -> Iterator[list]:
        """The records of ``keys`` (one prepared unit's unstored keys, as the plan keys them): its
        teacher-forced effects first, then one list per batch as soon as the batch finishes, built by
        ``engine/record.py``; batches with no key in ``keys`` are not computed. ``on_tokens`` gets each
        batch's answer tokens, one answer per record (the bar's ETA)."""
        from tamperbench.owmi.engine.record import build, result_of

        for group_keys, res in self._batches(unit, keys):
            if on_tokens is not None:
                on_tokens(sum(len(result_of(res, d)[3][0]) for _, _, d in group_keys))
            yield [build(self, unit, k, res, provenance_id) for k in group_keys]

    def _batches(self, unit: Unit, keys: list) -> Iterator[tuple[list, dict]]:
        """(the keys of one batch, its results by record coordinates), batch by batch, in this engine's
        order: the unit's effects, then per track its model-condition batches and its observer tiers."""
        spec = self.spec
        self.fill_effects(unit, {d["condition"] for _, _, d in keys})
        want: dict[tuple, list] = {}
        for k in keys:
            want.setdefault(self.group(k[2]), []).append(k)
        tiers = [(1, unit.cell.model, self.b), *[(2, o, ob) for o, ob in self.observers]]
        for track in spec.tracks:
            for group, compute in self.probe_batches(unit, track):
                if group in want:
                    t = time.perf_counter()
                    got = compute()
                    dt = (time.perf_counter() - t) / max(len(got), 1)
                    yield want[group], {(track, fam, scope, c, None): (*v, dt) for (c, fam, scope), v in got.items()}
            if "observer" not in spec.conditions:
                continue
            for tier, name, backend in tiers:
                for group, compute in self.observer_batches(unit, track, tier, backend):
                    if group in want:
                        t = time.perf_counter()
                        obs = compute()
                        dt = (time.perf_counter() - t) / max(len(obs), 1)
                        yield want[group], {(track, fam, scope, "observer", tier): (text, ids, [], resp, dt, probe3, name)
                                            for fam, (text, ids, probe3, resp) in obs.items() for scope in spec.scopes}

    # ------------------------------------------------------------------ preparation
    def track_axes(self, track: str) -> tuple[tuple[str, ...], int]:
        """A track's probe families and answer budget (Track C: the spontaneous reflection)."""
        if track == "C":
            return ("spontaneous",), self.spec.reflection_max_new_tokens
        return tuple(self.spec.probes), self.spec.probe_max_new_tokens

    def frame_system(self, frame: str) -> str | None:
        """The system message of a context frame (``protocol/design.py``'s ``frame``): the shared introspection
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
            if target.spec.label not in self._refs:  # one capture per object, not one per unit
                self._refs[target.spec.label] = reference_activation(self.b, target)
            reference = replace_reference(self.b, target, self.spec, index, seed, self._refs[target.spec.label])
        u = random_direction(rtarget.dim, stable_seed(seed, item.id, cell.obj.label, cell.op.name, cell.op.dose))
        system = self.frame_system(frame)
        task = cx.task_context(self.b, item.prompt_text(), system, self.spec.positions)
        base_ids, _ = self.baseline(item, task)
        unit = Unit(cell, item, index, seed, target, rtarget, concept, direction, reference, u, task, base_ids,
                    system=system)
        unit.effects["intervention"] = self.effects(unit, ["intervention"])["intervention"]
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

    def keep_baseline(self, unit: Unit) -> None:
        """The baseline's teacher-forced chunks, kept for every JS against it when they fit."""
        ids, start = unit.task.ids + unit.base_ids, min(unit.task.declared) if unit.task.declared else 0
        if unit.base_chunks is None and (len(ids) - start) * self.vocab * 4 <= BASELINE_KEEP_BYTES:
            unit.base_chunks = list(fw.distributions(self.model, ids, start, None, self.spec.js_chunk))

    # ------------------------------------------------------------------ impact matching (Eq. 7)
    def calibrate(self, units: list[Unit]) -> tuple[float, float, float, list]:
        """Impact matching over the cell's units: one eta for the cell (Eq. 7 matches means)."""
        for u in units:
            self.keep_baseline(u)
        target = sum(u.effects["intervention"]["js_mean"] for u in units) / len(units)
        start = sum(u.norm_unit for u in units) / len(units)
        eta, achieved, trace = calibrate_norm(lambda e: self.mean_js(units, e), target, start,
                                              self.spec.calibration_steps)
        for u in units:
            u.eta, u.match = eta, (target, achieved)
        return eta, target, achieved, trace

    def mean_js_sequential(self, units: list[Unit], eta: float) -> float:
        """The reference formula: one teacher-forced forward per unit, the mean of each unit's mean JS."""
        tot = 0.0
        for u in units:
            u.eta = eta
            iv = self.make_iv(u, "random_matched", u.task.declared)
            assert iv is not None  # random_matched is a model condition
            tot += fw.js_divergence(self.model, u.task.ids + u.base_ids, min(u.task.declared or [0]), iv,
                                    chunk=self.spec.js_chunk, baseline=u.base_chunks)[0]
        return tot / len(units)

    # ------------------------------------------------------------------ contexts
    @abc.abstractmethod
    def task_answer(self, unit: Unit, cond: str) -> str:
        """The task's answer text under ``cond`` (what Track B_visible and the observer read)."""

    def context(self, unit: Unit, track: str, family: str, cond: str) -> cx.Context:
        """The probe context of ``family`` on ``track`` (Track A, B_visible, B_masked) under ``cond``."""
        text = probe_text(family, person="first", n_layers=self.n_layers)
        task_text = unit.item.prompt_text()
        if track == "A":
            return cx.track_a(self.b, task_text, text, unit.system, self.spec.positions)
        if track == "B_visible":
            return cx.track_b_visible(self.b, task_text, self.task_answer(unit, cond), text, unit.system,
                                      self.spec.positions)
        return cx.track_b_masked(self.b, text, unit.system, self.spec.positions)

    def later_turn(self, unit: Unit, cond: str, family: str) -> tuple[str, list[int]]:
        """Tracks B_delayed and C: the later user turn after ``cond``'s own task answer: (the whole
        conversation's text, the ids fed after the answer)."""
        out_ids, out_text = unit.gens[cond][1], unit.gens[cond][2]
        person_text = probe_text(family, person="first", n_layers=self.n_layers)
        full, tail = cx.later_turn(self.b, unit.item.prompt_text(), out_text, person_text, unit.system)
        end_text = self.b.tokenizer.decode([out_ids[-1]]) if out_ids and out_ids[-1] in self.eos else ""
        if end_text and tail.startswith(end_text):
            tail = tail[len(end_text):]
        return full, self.b.tokenizer(tail, add_special_tokens=False)["input_ids"]

    def observer_record(self, unit: Unit, track: str) -> str:
        """What a text-only observer sees of the intervention run on ``track``."""
        task_text = unit.item.prompt_text()
        if track == "A":
            return f"Task given to the model:\n{task_text}"
        if track == "B_masked":
            return "(the record is withheld)"
        return f"Task given to the model:\n{task_text}\n\nThe model's answer:\n{self.task_answer(unit, 'intervention')}"

    def observe(self, backend, unit: Unit, track: str, family: str, max_new: int) -> tuple:
        """Text-only observer, one probe family: the visible record of the intervention run,
        third-person probe. Returns (prompt text, prompt ids, probe, answer)."""
        record = self.observer_record(unit, track)
        text3 = probe_text(family, person="third", n_layers=self.n_layers)
        msgs = cx.observer_prompt(record, text3)
        ids = backend.chat_ids(msgs, system=unit.system)
        fed = ids + self.readout.forced(family, backend.tokenizer)
        cache = fw.new_cache(backend.model)
        logits = fw.feed(backend.model, cache, fed, 0, None, "prefill")[-1:]
        answer = self.readout.answer_plain(backend.model, cache, logits, len(fed), family, max_new,
                                           set(backend.eos_ids), None, lambda i: None, backend.tokenizer)[0]
        return backend.chat_text(msgs, system=unit.system), ids, text3, answer

    def release(self, unit: Unit) -> None:
        """Drop a unit's task generations and rows once its records are built (they hold caches)."""
        unit.gens.clear()
        unit.task_rows = None
