"""Holds a local Ray instance for tests/e2e/runs/test_ray_executor.py (run by tests/e2e/runs/conftest.py).

It starts the instance the way ``--executor ray`` without ``--address`` does (``RayExecutor._init``:
``num_cpus`` = workers x cpus per worker, dashboard off), prints one line ``GCS_ADDRESS CPUS``, keeps
the instance until its stdin closes, then shuts it down. WHY a separate process: starting Ray costs
~5 s of waiting on a 2-core machine (GCS, API server, raylet, its two Python agents, each polled in
turn) and the shutdown ~1.4 s; begun at collection and ended in the background, both overlap other
tests, and the test joins the instance through ``--address``, the path a cluster user takes.
"""

from __future__ import annotations

import sys

from tamperbench.runs.ray_executor import RayExecutor


def main() -> None:
    ray = RayExecutor(workers=2)._init()
    try:
        print(ray.get_runtime_context().gcs_address, int(ray.cluster_resources().get("CPU", 0)), flush=True)
        sys.stdin.read()  # until the test session closes the pipe (or dies)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
