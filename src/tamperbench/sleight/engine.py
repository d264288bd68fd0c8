"""The Sleight of Word swap engine: every trial of many questions decoded in one batched KV cache.

Why it is shaped like this (all greedy, so every saving below is exact, not an approximation):

* The clean answer and every substituted answer of a question are identical up to the first
  trigger, so one *prefix row* per question decodes that part once. At its first whole-word
  trigger the row is snapshotted; the prefix row carries on as the clean run, and each
  substitution is admitted from the snapshot (trigger rolled back, replacement queued) whenever a
  slot is free. A question with no trigger costs one row and its trials are copies.
* Each row has a queue of forced tokens: the replacement, which may be several tokens. Injected
  tokens count toward the budget and are marked.
* The boundary after a trigger needs the next token; the step decoder already holds the next
  greedy token after every step (``next_greedy``), so the look-ahead costs no forward pass and
  taking it back is a one-column rollback. ``detector.is_candidate`` keeps the pair-decoding off
  ordinary tokens.
* Matched-branch baseline: at every swap the unaltered branch (trigger kept) is decoded for
  ``window`` more tokens from the same prefix. For a trial's first swap that branch *is* the clean
  run, so it is read off the prefix row; later swaps fork a short-lived branch row.
* Finished rows free their slot at once; admission order is branches, then waiting trials of
  started questions, then new questions, so memory stays bounded by the batch, not the task list.
* Slots: as many as memory allows for this run's real context (its longest chat prompt + the
  budget; models/memory.py ``slot_batch``), at most the rows its questions can fill, never more
  than an explicit ``batch_size``, and without one at most the device's throughput ceiling
  (``memory.device_ceiling``: past ~128-256 rows a CPU decodes fewer tokens a second, measured
  there). Not the backend's load-time guess (1,024-token rows): greedy tokens do not depend on the
  slot count, throughput and memory do. The choice and its reason are in ``stats`` (``batch_rows``,
  ``batch_by``, ...) and in ``batch``, which the runner stores with every record.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tamperbench.errors import UserError
from tamperbench.models.memory import BatchChoice, slot_batch
from tamperbench.models.decoding.rows import RowSnapshot, StepResult

__all__ = ["DecodeTrace", "QuestionResult", "QuestionTask", "SwapEngine", "SwapEvent", "choose_slots"]


@dataclass
class QuestionTask:
    question_id: str
    prompt_ids: list[int]
    substitutions: list[str]
    need_clean: bool


@dataclass
class SwapEvent:
    position: int  # index in the trace of the first injected token
    trigger: str
    surface: str
    n_injected: int
    matched_clean_logprobs: list[float] = field(default_factory=list)
    matched_clean_entropy_full: list[float] = field(default_factory=list)
    matched_clean_entropy_top20: list[float] = field(default_factory=list)


@dataclass
class DecodeTrace:
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropy_full: list[float] = field(default_factory=list)
    entropy_top20: list[float] = field(default_factory=list)
    injected: list[bool] = field(default_factory=list)
    swaps: list[SwapEvent] = field(default_factory=list)
    mentions: int = 0
    spaceless: int = 0
    topk_ids: list[list[int]] | None = None
    topk_logprobs: list[list[float]] | None = None
    finish_reason: str = "length"
    decode_seconds: float = 0.0  # this trace's share of batched decoding wall time (shared prefix included)

    def push(self, res: StepResult, injected: bool, keep_topk: bool) -> None:
        self.token_ids.append(res.token)
        self.logprobs.append(res.logprob)
        self.entropy_full.append(res.entropy)
        self.entropy_top20.append(res.entropy_topk)
        self.injected.append(injected)
        if keep_topk:
            self.topk_ids.append(res.topk_ids)
            self.topk_logprobs.append(res.topk_logprobs)

    def pop(self) -> None:
        for lst in (self.token_ids, self.logprobs, self.entropy_full, self.entropy_top20, self.injected):
            lst.pop()
        if self.topk_ids is not None:
            self.topk_ids.pop()
            self.topk_logprobs.pop()


@dataclass
class QuestionResult:
    question_id: str
    clean: DecodeTrace | None
    trials: dict[str, DecodeTrace]


@dataclass
class _Question:
    task: QuestionTask
    clean: DecodeTrace | None = None
    clean_done: bool = False
    first_swap: int | None = None  # position of the first trigger in the clean run
    snap: RowSnapshot | None = None
    waiting: deque = field(default_factory=deque)  # (substitution, trace, replacement ids)
    running: int = 0  # live trial + branch rows
    trials: dict[str, DecodeTrace] = field(default_factory=dict)

    def done(self) -> bool:
        return self.clean_done and not self.waiting and self.running == 0


@dataclass
class _RowState:
    kind: str  # "prefix" | "trial" | "branch"
    q: _Question
    trace: DecodeTrace
    stop_at: int  # finish when the trace reaches this many tokens
    queue: deque = field(default_factory=deque)
    sub: str | None = None
    event: SwapEvent | None = None  # branch rows: the swap whose matched values they fill


def choose_slots(backend, tasks: list[QuestionTask], *, max_new_tokens: int, window: int,
                 batch_size: int | None = None, matched_branches: bool = True, free: int | None = None) -> BatchChoice:
    """The engine's slot count for ``tasks`` (module docstring): memory for rows of the longest
    prompt + ``max_new_tokens``, at most the rows the tasks can fill (a prefix row per question, a
    row per trial, each trial's branch rows alive at most ``window`` steps) and ``batch_size`` (else
    the device ceiling). ``free``: bytes of free memory (None: read this machine)."""
    branch = 1 + (window if matched_branches else 0)
    fill = sum(1 + len(t.substitutions) * branch for t in tasks)
    return slot_batch(backend.model, backend.device, prompt_len=max(len(t.prompt_ids) for t in tasks),
                      new_tokens=max_new_tokens, limit=fill, cap=batch_size, free=free)


class SwapEngine:
    """Batched greedy decoding of Sleight of Word trials (see the module docstring)."""

    def __init__(self, backend, detector, *, max_new_tokens: int, batch_size: int | None = None,
                 window: int = 8, topk: int = 20, keep_topk: bool = False, matched_branches: bool = True):
        if max_new_tokens < 1:
            raise UserError(f"--max-new-tokens must be at least 1, got {max_new_tokens}")
        if batch_size is not None and batch_size < 1:
            raise UserError(f"--batch-size must be a positive integer, got {batch_size}")
        if window < 1:
            raise UserError(f"window must be at least 1, got {window}")
        self.backend, self.detector = backend, detector
        self.budget, self.window, self.topk, self.keep_topk = max_new_tokens, window, topk, keep_topk
        # False skips the forked branch rows of later swaps (their matched lists stay empty): only
        # for benchmarks that compare against loops doing no baseline work.
        self.matched_branches = matched_branches
        self.batch_size = batch_size  # the user's cap (None: memory decides, see choose_slots)
        self.batch: BatchChoice | None = None  # set by run(): the slots it used and why
        self.eos = set(backend.eos_ids)
        # forward_seconds: the model's own share of ``seconds`` (the rest is bookkeeping, detection,
        # prefill copies): what the benchmark reports to show where the time goes
        # step_profile: {rows in the forward: [steps, forward seconds, context columns summed]}, what
        # sleight/roofline.py turns into the MFU this batch profile allows (one dict update per step)
        self.stats: dict[str, Any] = {"tokens": 0, "steps": 0, "swaps": 0, "trials": 0, "seconds": 0.0,
                                      "forward_seconds": 0.0, "step_profile": {}}

    # ------------------------------------------------------------------ public
    def run(self, tasks: Iterable[QuestionTask], progress: Callable[[dict], None] | None = None
            ) -> Iterator[QuestionResult]:
        tasks = list(tasks)
        if not tasks:
            raise UserError("no questions to run (empty question list)")
        self.batch = choose_slots(self.backend, tasks, max_new_tokens=self.budget, window=self.window,
                                  batch_size=self.batch_size, matched_branches=self.matched_branches)
        self.stats.update(self.batch.record())
        dec = self.backend.step_decoder(topk=self.topk, capacity=self.batch.rows)
        # a row spans its prompt, the budget and one hole per swap: sized once, not grown every 64 columns
        dec.reserve_columns(max(len(t.prompt_ids) for t in tasks) + self.budget + dec.kv.column_chunk)
        todo = deque(_Question(t) for t in tasks)
        active: list[_Question] = []
        rows: dict[int, _RowState] = {}
        branches: deque = deque()  # (snapshot, _RowState) waiting for a slot
        t_start = time.perf_counter()
        while todo or active:
            self._admit(dec, rows, branches, active, todo)
            if not rows:  # everything left is finished
                done = [q for q in active if q.done()]
                if not done:
                    raise RuntimeError("swap engine stalled: questions pending but no rows to decode")
                for q in done:
                    active.remove(q)
                    self.stats["trials"] += len(q.task.substitutions)
                    yield self._result(q)
                continue
            force = {rid: st.queue[0] for rid, st in rows.items() if st.queue}
            t0, f0 = time.perf_counter(), dec.forward_seconds
            results = dec.step(force)
            prof = self.stats["step_profile"].setdefault(dec.b, [0, 0.0, 0])
            prof[0] += 1
            prof[1] += dec.forward_seconds - f0
            prof[2] += dec.n
            finished: list[int] = []
            for res in results:
                st = rows[res.row]
                if self._handle(dec, res, st, rows, branches):
                    finished.append(res.row)
            dt = time.perf_counter() - t0
            share = dt / max(1, len(results))
            for res in results:
                rows[res.row].trace.decode_seconds += share
            self.stats["tokens"] += len(results)
            self.stats["steps"] += 1
            for rid in finished:
                st = rows.pop(rid)
                self._finish(st)
            dec.release(finished)
            self.stats["seconds"] = time.perf_counter() - t_start
            self.stats["forward_seconds"] = dec.forward_seconds
            for q in list(active):
                if q.done():
                    active.remove(q)
                    self.stats["trials"] += len(q.task.substitutions)
                    yield self._result(q)
            if progress is not None:
                progress(dict(self.stats))

    # ------------------------------------------------------------------ admission
    def _admit(self, dec, rows, branches, active, todo) -> None:
        while branches and dec.free_slots:
            snap, st = branches.popleft()
            [rid] = dec.import_rows(snap, 1)
            rows[rid] = st
        for q in active:
            while q.waiting and dec.free_slots:
                take = min(len(q.waiting), dec.free_slots)
                rids = dec.import_rows(q.snap, take)
                for rid in rids:
                    sub, trace, repl = q.waiting.popleft()
                    dec.rollback(rid, 1)  # take back the trigger; its distribution is restored
                    rows[rid] = _RowState("trial", q, trace, self.budget, deque(repl), sub)
                    q.running += 1
            if not q.waiting:
                q.snap = None  # every trial admitted: the snapshot can go
        waiting = sum(len(q.waiting) for q in active)
        new: list[_Question] = []
        while todo and dec.free_slots - len(new) > waiting:
            new.append(todo.popleft())
        if new:
            rids = dec.add_rows([q.task.prompt_ids for q in new])
            for rid, q in zip(rids, new):
                q.clean = self._new_trace()
                rows[rid] = _RowState("prefix", q, q.clean, self.budget)
                active.append(q)

    def _new_trace(self) -> DecodeTrace:
        tr = DecodeTrace()
        if self.keep_topk:
            tr.topk_ids, tr.topk_logprobs = [], []
        return tr

    # ------------------------------------------------------------------ per token
    def _handle(self, dec, res: StepResult, st: _RowState, rows, branches) -> bool:
        """Record one emitted token; detect and apply swaps. Returns True when the row is done."""
        tr = st.trace
        injected = bool(st.queue)
        if injected:
            st.queue.popleft()
        tr.push(res, injected, self.keep_topk)
        n = len(tr.token_ids)
        at_end = n >= st.stop_at
        eos = res.is_eos and not injected
        if st.kind == "branch":
            ev = st.event
            ev.matched_clean_logprobs.append(res.logprob)
            ev.matched_clean_entropy_full.append(res.entropy)
            ev.matched_clean_entropy_top20.append(res.entropy_topk)
            return at_end or eos
        if not injected and not eos and self.detector.is_candidate(res.token):
            prev = tr.token_ids[-2] if n > 1 else None
            nxt = None if (n >= self.budget or res.next_greedy in self.eos) else res.next_greedy
            occ = self.detector.classify(prev, res.token, nxt)
            if occ.kind == "mention":
                tr.mentions += 1
            elif occ.kind == "spaceless":
                tr.spaceless += 1
            elif occ.kind == "swap":
                if st.kind == "prefix" and st.q.first_swap is None:
                    self._first_swap(dec, res.row, st, occ, prev)
                elif st.kind == "trial":
                    self._swap(dec, res.row, st, occ, prev, rows, branches)
                    return False
        if eos:
            tr.finish_reason = "eos"
            return True
        if at_end:
            tr.finish_reason = "length" if n >= self.budget else tr.finish_reason
            return True
        return False

    def _first_swap(self, dec, rid: int, st: _RowState, occ, prev: int | None) -> None:
        """The prefix row hit its first trigger: queue every substitution from a snapshot."""
        q = st.q
        p = len(st.trace.token_ids) - 1
        q.first_swap = p
        if q.task.substitutions:
            q.snap = dec.export_row(rid)
            base = copy.deepcopy(st.trace)
            base.pop()
            room = self.budget - p
            for sub in q.task.substitutions:
                repl = self.detector.replacement_ids(occ, sub, prev)[:room]
                tr = copy.deepcopy(base)
                tr.swaps.append(SwapEvent(p, occ.trigger, occ.surface, len(repl)))
                q.waiting.append((sub, tr, repl))
        if not q.task.need_clean:  # the clean run is only needed as the first swap's matched branch
            st.stop_at = min(self.budget, p + 1 + self.window)
        self.stats["swaps"] += len(q.task.substitutions)

    def _swap(self, dec, rid: int, st: _RowState, occ, prev: int | None, rows, branches) -> None:
        """A trial hit another trigger: branch off the unaltered continuation, roll back, inject."""
        tr = st.trace
        p = len(tr.token_ids) - 1
        room = self.budget - p
        repl = self.detector.replacement_ids(occ, st.sub, prev)[:room]
        ev = SwapEvent(p, occ.trigger, occ.surface, len(repl))
        n_branch = min(self.window, self.budget - (p + 1)) if self.matched_branches else 0
        if n_branch > 0:
            bst = _RowState("branch", st.q, DecodeTrace(), n_branch, event=ev)
            st.q.running += 1
            if dec.free_slots:
                [bid] = dec.fork(rid, 1)
                rows[bid] = bst
            else:
                branches.append((dec.export_row(rid), bst))
        dec.rollback(rid, 1)
        tr.pop()
        tr.swaps.append(ev)
        st.queue.extend(repl)
        self.stats["swaps"] += 1

    def _finish(self, st: _RowState) -> None:
        q = st.q
        if st.kind == "prefix":
            q.clean_done = True
        elif st.kind == "trial":
            q.running -= 1
            assert st.sub is not None  # a trial row always names its substitution
            q.trials[st.sub] = st.trace
        else:
            q.running -= 1

    def _result(self, q: _Question) -> QuestionResult:
        clean = q.clean
        assert clean is not None  # a question's result is built after its clean answer
        trials: dict[str, DecodeTrace] = {}
        if q.first_swap is None:  # untouched: no whole-word trigger in the clean answer
            for sub in q.task.substitutions:
                trials[sub] = copy.deepcopy(clean)
        else:
            p = q.first_swap
            w = slice(p + 1, p + 1 + self.window)
            for sub in q.task.substitutions:
                tr = q.trials[sub]
                ev = tr.swaps[0]
                ev.matched_clean_logprobs = clean.logprobs[w]
                ev.matched_clean_entropy_full = clean.entropy_full[w]
                ev.matched_clean_entropy_top20 = clean.entropy_top20[w]
                trials[sub] = tr
        return QuestionResult(q.task.question_id, clean if q.task.need_clean else None, trials)
