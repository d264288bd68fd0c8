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
every client's latency grow without limit. ``max_queue`` counts jobs beyond the running batch: with 0,
a job is taken only while the batch has a free row.

Scoring a prompt (echo with log-probs: teacher-forced log-probs of the prompt's own tokens) is a job
too (``Job.score_prompt``), so it shares the queue, the batch's rows and the cancellation: it runs on
this thread, one chunk of :data:`SCORE_CHUNK` tokens per loop turn between decoding steps, and an
abandoned one stops at the next chunk. When no job is running the decoder is dropped, so the
cache of a burst of long requests is freed rather than kept for the life of the server.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch

SCORE_CHUNK = 32  # prompt tokens per forward pass of a scoring job: the most a cancelled one still costs


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
    score_prompt: bool = False  # score the prompt's own tokens (echo log-probs) instead of decoding
    prompt_logprobs: list[float | None] = field(default_factory=list)  # None for the first token
    prompt_top_ids: list[list[int]] = field(default_factory=list)  # [] for the first token
    prompt_top_logprobs: list[list[float]] = field(default_factory=list)


class QueueFull(Exception):
    """The waiting line holds ``max_queue`` jobs: try again later."""


class ContinuousBatcher:
    """A daemon thread stepping every admitted job; ``submit`` returns the job's future."""

    def __init__(self, backend, *, max_batch: int, topk: int = 20, max_queue: int = 64):
        self.backend, self.max_batch, self.topk, self.max_queue = backend, max_batch, topk, max_queue
        self.inbox: queue.Queue[Job] = queue.Queue()
        self.eos = set(backend.eos_ids)
        self.stats = {"steps": 0, "tokens": 0, "max_rows": 0, "active": 0, "dropped": 0, "refused": 0,
                      "scored_tokens": 0}
        self._scoring: list[tuple[Job, Generator[None, None, None]]] = []  # admitted scoring jobs, served round-robin
        self._inflight = 0  # jobs submitted and not finished (waiting, decoding or scoring)
        self._lock = threading.Lock()
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
        """Queue ``job``; raises :class:`QueueFull` when the batch's rows are taken and ``max_queue`` jobs
        already wait beyond them (counted exactly: a job counts from here until its future is done)."""
        with self._lock:
            if self._inflight >= self.max_batch + self.max_queue:
                self.stats["refused"] += 1
                raise QueueFull(f"{self.max_queue} requests are waiting")
            self._inflight += 1
        job.future.add_done_callback(self._finished)
        if job.temperature > 0:
            job.generator = torch.Generator().manual_seed(int(job.seed or 0))
        self.inbox.put(job)
        return job.future

    def _finished(self, _future: Future) -> None:
        with self._lock:
            self._inflight -= 1

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
                self.stats["active"] = len(active) + len(self._scoring)
                if self._scoring:
                    self._score_chunk()
                if not active:
                    if not self._scoring and self.stats["steps"] != self._idle_at:  # free a used decoder's cache
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
        for job, it in [(j, it) for j, it in self._scoring if j.abandoned]:
            self._scoring.remove((job, it))
            it.close()  # its cache goes with the generator
            job.finish_reason = "abandoned"
            job.future.set_result(job)
            self.stats["dropped"] += 1
        gone = [rid for rid, j in active.items() if j.abandoned]
        if not gone:
            return
        for rid in gone:
            job = active.pop(rid)
            job.finish_reason = "abandoned"
            job.future.set_result(job)  # no one reads it; a result, so nothing logs an unread exception
        dec.release(gone)
        self.stats["dropped"] += len(gone)

    def _take(self, job: Job, new: list[Job]) -> None:
        """A job leaving the waiting line: a decoding row, a scoring job, or dropped (cancelled)."""
        if not job.future.set_running_or_notify_cancel():
            self.stats["dropped"] += 1
        elif job.score_prompt:
            self._scoring.append((job, self._score(job)))
        else:
            new.append(job)

    def _admit(self, dec, active: dict[int, Job]) -> None:
        """Move waiting jobs into free rows (a scoring job takes one too); blocks briefly only when
        nothing is running."""
        new: list[Job] = []
        if not active and not self._scoring:
            try:
                self._take(self.inbox.get(timeout=0.05), new)
            except queue.Empty:
                return
        while dec.free_slots > len(new) + len(self._scoring):
            try:
                job = self.inbox.get_nowait()
            except queue.Empty:
                break
            self._take(job, new)
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

    def _score(self, job: Job) -> Generator[None, None, None]:
        """Fill the job's prompt log-probs one chunk per ``next``: the distribution after position p
        gives the log-prob of token p + 1 (the first token has none, as in OpenAI's echo)."""
        ids = job.prompt_ids
        job.prompt_logprobs, job.prompt_top_ids, job.prompt_top_logprobs = [None], [[]], [[]]
        for positions, chunk in self.backend.next_token_distributions(ids, chunk_size=SCORE_CHUNK):
            for pos, row in zip(positions, chunk):
                if pos + 1 < len(ids):
                    job.prompt_logprobs.append(float(row[ids[pos + 1]]))
                    vals, idx = row.topk(job.top) if job.top else (torch.empty(0), torch.empty(0))
                    job.prompt_top_ids.append([int(a) for a in idx])
                    job.prompt_top_logprobs.append([float(b) for b in vals])
            self.stats["scored_tokens"] += len(positions)
            yield

    def _score_chunk(self) -> None:
        """One forward pass of the first scoring job, which then goes to the back of the line."""
        job, it = self._scoring.pop(0)
        try:
            next(it)
        except StopIteration:
            job.future.set_result(job)
        except Exception as err:  # noqa: BLE001 - this job fails; the others go on
            job.future.set_exception(err)
        else:
            self._scoring.append((job, it))

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
