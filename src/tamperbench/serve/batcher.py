"""Continuous batching of concurrent requests through one step decoder.

Why our own loop: the server's clients arrive at any moment with prompts of any length, and the
step decoder already admits rows into free slots between steps and frees a finished row at once.
One thread owns the decoder (torch work never runs on the event loop); HTTP handlers hand it a
:class:`Job` and wait on the job's future. Greedy output equals a request run alone, because every row
attends only to its own columns of the cache.

Abandoned work is dropped: a handler whose client has gone calls :meth:`ContinuousBatcher.abandon`; a
waiting job is cancelled before it is admitted, a running one leaves the batch before the next step,
so its rows stop costing compute and cache. The waiting line is bounded (``max_queue``): a job past it
is refused with :class:`QueueFull` (the server answers 503 with ``Retry-After``) instead of letting
every client's latency grow without limit. When no job is running the decoder is dropped, so the
cache of a burst of long requests is freed rather than kept for the life of the server.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch


@dataclass
class Job:
    """One request's decoding. ``top`` = how many top log-probs to return per token (0-20)."""

    prompt_ids: list[int]
    max_tokens: int
    stop: list[str] = field(default_factory=list)
    top: int = 0
    temperature: float = 0.0
    seed: int | None = None
    future: Future = field(default_factory=Future)
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_ids: list[list[int]] = field(default_factory=list)
    top_logprobs: list[list[float]] = field(default_factory=list)
    text: str = ""
    finish_reason: str = "length"
    generator: torch.Generator | None = None
    abandoned: bool = False  # set by the handler when its client disconnected


class QueueFull(Exception):
    """The waiting line holds ``max_queue`` jobs: try again later."""


class ContinuousBatcher:
    """A daemon thread stepping every admitted job; ``submit`` returns the job's future."""

    def __init__(self, backend, *, max_batch: int, topk: int = 20, max_queue: int = 64):
        self.backend, self.max_batch, self.topk, self.max_queue = backend, max_batch, topk, max_queue
        self.inbox: queue.Queue[Job] = queue.Queue()
        self.eos = set(backend.eos_ids)
        self.stats = {"steps": 0, "tokens": 0, "max_rows": 0, "active": 0, "dropped": 0, "refused": 0}
        self._stop = threading.Event()
        self._idle_at = 0  # decoding steps taken when the decoder was last dropped
        self._warm_up()
        self._thread = threading.Thread(target=self._loop, name="tamperbench-batcher", daemon=True)
        self._thread.start()

    def _warm_up(self) -> None:
        """One tiny forward pass in the creating (main) thread before the decoding thread starts.

        Measured here (CPU torch 2.13, 2 cores): when the process's first forward pass runs on a
        non-main thread, every later pass on that thread is about 7x slower (16 tokens: 35 s instead
        of 5 s) - the CPU thread pool is set up from the wrong thread. A 3-token pass here avoids it.
        """
        model = getattr(self.backend, "model", None)
        if model is None:
            return
        with torch.inference_mode():
            model(torch.tensor([[self.backend.eos_ids[0]] * 3], device=getattr(self.backend, "device", "cpu")))

    def waiting(self) -> int:
        """Jobs in the waiting line that no one has cancelled."""
        with self.inbox.mutex:
            return sum(not j.future.cancelled() for j in self.inbox.queue)

    def submit(self, job: Job) -> Future:
        """Queue ``job``; raises :class:`QueueFull` when ``max_queue`` jobs are already waiting."""
        if self.waiting() >= self.max_queue:
            self.stats["refused"] += 1
            raise QueueFull(f"{self.max_queue} requests are waiting")
        if job.temperature > 0:
            job.generator = torch.Generator().manual_seed(int(job.seed or 0))
        self.inbox.put(job)
        return job.future

    def abandon(self, job: Job) -> None:
        """The job's client has gone: cancel it if it still waits, else drop its row at the next step."""
        if not job.future.cancel():
            job.abandoned = True

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    # ------------------------------------------------------------------ the loop
    def _loop(self) -> None:
        dec = None
        active: dict[int, Job] = {}
        while not self._stop.is_set():
            try:
                if dec is None:
                    dec = self.backend.step_decoder(topk=self.topk, capacity=self.max_batch)
                self._admit(dec, active)
                self._drop_abandoned(dec, active)
                self.stats["active"] = len(active)
                if not active:
                    if self.stats["steps"] != self._idle_at:  # it decoded since it was last fresh: free its cache
                        dec, self._idle_at = None, self.stats["steps"]
                    continue
                self._step(dec, active)
            except Exception as err:  # noqa: BLE001 - a failed step fails its jobs, never the server
                for job in active.values():
                    if not job.future.done():
                        job.future.set_exception(err)
                active.clear()
                dec = None

    def _drop_abandoned(self, dec, active: dict[int, Job]) -> None:
        gone = [rid for rid, j in active.items() if j.abandoned]
        if not gone:
            return
        for rid in gone:
            job = active.pop(rid)
            job.finish_reason = "abandoned"
            job.future.set_result(job)  # no one reads it; a result, so nothing logs an unread exception
        dec.release(gone)
        self.stats["dropped"] += len(gone)

    def _admit(self, dec, active: dict[int, Job]) -> None:
        """Move waiting jobs into free rows; blocks briefly only when nothing is running."""
        new: list[Job] = []
        if not active:
            try:
                job = self.inbox.get(timeout=0.05)
            except queue.Empty:
                return
            if job.future.set_running_or_notify_cancel():
                new.append(job)
            else:
                self.stats["dropped"] += 1
        while dec.free_slots > len(new):
            try:
                job = self.inbox.get_nowait()
            except queue.Empty:
                break
            if job.future.set_running_or_notify_cancel():
                new.append(job)
            else:
                self.stats["dropped"] += 1
        if not new:
            return
        try:
            rids = dec.add_rows([j.prompt_ids for j in new])
        except Exception as err:  # noqa: BLE001 - these jobs fail; the running ones go on
            for j in new:
                j.future.set_exception(err)
            return
        active.update(zip(rids, new))
        self.stats["max_rows"] = max(self.stats["max_rows"], len(active))

    def _step(self, dec, active: dict[int, Job]) -> None:
        force = {}
        sampled = [rid for rid, j in active.items() if j.temperature > 0]
        if sampled:
            logp = dec.pending_logprobs(sampled)
            for rid, row in zip(sampled, logp):
                j = active[rid]
                # shifted so the best token is exactly 0, and at least 1e-6 (a smaller one is 0 in float32):
                # a tiny temperature gives one-hot, never NaN
                probs = torch.softmax((row - row.max()) / max(j.temperature, 1e-6), dim=-1)
                force[rid] = int(torch.multinomial(probs, 1, generator=j.generator))
        results = dec.step(force)
        self.stats["steps"] += 1
        self.stats["tokens"] += len(results)
        finished = []
        for res in results:
            job = active[res.row]
            job.tokens.append(res.token)
            job.logprobs.append(float(res.logprob))
            if job.top:
                job.top_ids.append(list(res.topk_ids[: job.top]))
                job.top_logprobs.append([float(x) for x in res.topk_logprobs[: job.top]])
            if self._done(job, res.token):
                finished.append(res.row)
        for rid in finished:
            job = active.pop(rid)
            job.future.set_result(job)
        dec.release(finished)

    def _done(self, job: Job, token: int) -> bool:
        if token in self.eos:  # kept in the tokens and log-probs (as vLLM does); decoded text drops it
            job.finish_reason = "stop"
            return True
        if job.stop:
            text = self.backend.decode(job.tokens)
            hits = [text.find(s) for s in job.stop if s and s in text]
            if hits:
                job.text = text[: min(hits)]
                job.finish_reason = "stop"
                return True
        if len(job.tokens) >= job.max_tokens:
            job.finish_reason = "length"
            return True
        return False
