"""Continuous batching of concurrent requests through one step decoder.

Why our own loop: the server's clients arrive at any moment with prompts of any length, and the
step decoder already admits rows into free slots between steps and frees a finished row at once.
One thread owns the decoder (torch work never runs on the event loop); HTTP handlers hand it a
:class:`Job` and wait on the job's future. Greedy output equals a request run alone, because every row
attends only to its own columns of the cache.
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


class ContinuousBatcher:
    """A daemon thread stepping every admitted job; ``submit`` returns the job's future."""

    def __init__(self, backend, *, max_batch: int, topk: int = 20):
        self.backend, self.max_batch, self.topk = backend, max_batch, topk
        self.inbox: queue.Queue[Job] = queue.Queue()
        self.eos = set(backend.eos_ids)
        self.stats = {"steps": 0, "tokens": 0, "max_rows": 0}
        self._stop = threading.Event()
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

    def submit(self, job: Job) -> Future:
        if job.temperature > 0:
            job.generator = torch.Generator().manual_seed(int(job.seed or 0))
        self.inbox.put(job)
        return job.future

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    # ------------------------------------------------------------------ the loop
    def _loop(self) -> None:
        dec = self.backend.step_decoder(topk=self.topk, capacity=self.max_batch)
        active: dict[int, Job] = {}
        while not self._stop.is_set():
            try:
                self._admit(dec, active)
                if not active:
                    continue
                self._step(dec, active)
            except Exception as err:  # noqa: BLE001 - a failed step fails its jobs, never the server
                for job in active.values():
                    if not job.future.done():
                        job.future.set_exception(err)
                active.clear()
                dec = self.backend.step_decoder(topk=self.topk, capacity=self.max_batch)

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
        while dec.free_slots > len(new):
            try:
                job = self.inbox.get_nowait()
            except queue.Empty:
                break
            if job.future.set_running_or_notify_cancel():
                new.append(job)
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
                probs = torch.softmax(row / j.temperature, dim=-1)
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
