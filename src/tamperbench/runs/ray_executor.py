"""``--executor ray [--address ADDR]``: spread a run's work units over Ray actors.

Why actors: each actor loads the model once (``Worker.setup``) and then takes chunks of units; one
model per worker or GPU is the natural unit on a cluster. Records travel back to the driver, which
alone writes the store (:func:`tamperbench.runs.commit`), so the store never sees two writers.

Failure model: a chunk whose actor dies (node lost, OOM, ``kill -9``) is given to another actor,
up to ``max_retries`` times; a fresh actor replaces the dead one. Units are keyed, so a chunk that
finished and was committed is never run again, and a chunk that died is re-run whole: nothing is lost
and, because the commit ignores stored keys, nothing is duplicated. Without ``address`` a local Ray
instance is started with this machine's CPUs; Ray's dashboard is off.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from tamperbench.errors import UserError
from tamperbench.runs.executor import Worker
from tamperbench.runs.units import Finished, WorkUnit


class _Actor:
    """Holds one worker context (a loaded model) and runs chunks of units on it."""

    def __init__(self, worker: Worker):
        import os

        self.worker = worker
        self.context = worker.make_context()
        self.pid = os.getpid()

    def getpid(self) -> int:
        return self.pid

    def run(self, units: list[WorkUnit]) -> list[list[Finished]]:
        return list(self.worker.run(self.context, units, None))


class RayExecutor:
    def __init__(self, address: str | None = None, *, workers: int = 2, cpus_per_worker: float = 1.0,
                 gpus_per_worker: float = 0.0, chunk: int = 1, max_retries: int = 3,
                 runtime_env: dict | None = None):
        if workers < 1 or chunk < 1:
            raise UserError("--executor ray: workers and chunk must be at least 1")
        self.address, self.workers, self.chunk, self.max_retries = address, workers, chunk, max_retries
        self.cpus, self.gpus, self.runtime_env = cpus_per_worker, gpus_per_worker, runtime_env
        self.actors: list = []

    def init_kwargs(self) -> dict[str, Any]:
        """What ``ray.init`` is given: the cluster's address, or for a local instance its CPU count
        (workers x CPUs per worker, at least 1); dashboard and worker log forwarding off; the job-level
        ``runtime_env`` as given."""
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "runtime_env": self.runtime_env or None}
        if self.address:
            kwargs["address"] = self.address
        else:
            kwargs["num_cpus"] = max(1, int(self.workers * self.cpus))
        return kwargs

    def _init(self):
        try:
            import ray
        except ImportError:
            raise UserError("--executor ray needs the ray extra: pip install 'tamperbench[ray]'") from None
        if not ray.is_initialized():
            try:
                ray.init(**self.init_kwargs())
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise UserError(f"--address {self.address}: cannot join the Ray cluster ({err})") from None
        return ray

    def execute(self, units: Sequence[WorkUnit], worker: Worker) -> Iterator[list[Finished]]:
        if not units:
            return
        ray = self._init()
        remote = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus)(_Actor)
        chunks = deque((i, list(units[i:i + self.chunk])) for i in range(0, len(units), self.chunk))
        tries = {i: 0 for i, _ in chunks}
        idle = deque(remote.remote(worker) for _ in range(min(self.workers, len(chunks))))
        self.actors = list(idle)
        running: dict = {}  # ObjectRef -> (actor, chunk id, units)
        while chunks or running:
            while idle and chunks:
                actor = idle.popleft()
                cid, part = chunks.popleft()
                running[actor.run.remote(part)] = (actor, cid, part)
            done, _ = ray.wait(list(running), num_returns=1)
            ref = done[0]
            actor, cid, part = running.pop(ref)
            try:
                batches = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as err:
                tries[cid] += 1
                if tries[cid] > self.max_retries:
                    raise UserError(f"--executor ray: units {part[0].key[:12]}... failed {tries[cid]} times "
                                    f"(last: {type(err).__name__})") from None
                chunks.appendleft((cid, part))
                fresh = remote.remote(worker)  # replaces the dead actor
                self.actors = [a for a in self.actors if a is not actor] + [fresh]
                idle.append(fresh)
                continue
            idle.append(actor)
            yield from batches

    def actor_pids(self) -> list[int]:
        """PIDs of the live actors (tests kill one to prove rescheduling)."""
        import ray

        return ray.get([a.getpid.remote() for a in self.actors])


def executor_from_options(kind: str, address: str | None, workers: int) -> RayExecutor | None:
    """``--executor inprocess|ray``: None means the runner's default in-process executor."""
    if kind == "inprocess":
        if address:
            raise UserError("--address: only meaningful with --executor ray")
        return None
    if kind != "ray":
        raise UserError(f"--executor: must be inprocess or ray, got {kind!r}")
    return RayExecutor(address, workers=workers)
