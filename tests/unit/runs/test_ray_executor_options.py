"""What ``RayExecutor`` hands to ``ray.init`` (no Ray started: the cluster test is
tests/e2e/runs/test_ray_executor.py, which joins by address and gets its code through the instance's
PYTHONPATH, so the job-level ``runtime_env`` pass-through is pinned here)."""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.runs.ray_executor import RayExecutor, executor_from_options


def test_runtime_env_reaches_ray_init_as_given_and_none_when_absent():
    env = {"env_vars": {"PYTHONPATH": "/somewhere"}, "pip": ["x==1"]}
    assert RayExecutor(runtime_env=env).init_kwargs()["runtime_env"] == env
    assert RayExecutor("ray://h:10001", runtime_env=env).init_kwargs()["runtime_env"] == env
    assert RayExecutor().init_kwargs()["runtime_env"] is None
    assert RayExecutor(runtime_env={}).init_kwargs()["runtime_env"] is None


def test_local_instance_gets_workers_times_cpus_and_a_cluster_gets_only_its_address():
    local = RayExecutor(workers=3, cpus_per_worker=1.5).init_kwargs()
    assert local == {"include_dashboard": False, "log_to_driver": False, "runtime_env": None, "num_cpus": 4}
    assert RayExecutor(workers=1, cpus_per_worker=0.25).init_kwargs()["num_cpus"] == 1  # at least one CPU
    joined = RayExecutor("10.0.0.1:6379", workers=3).init_kwargs()
    assert joined == {"include_dashboard": False, "log_to_driver": False, "runtime_env": None,
                      "address": "10.0.0.1:6379"}  # Ray refuses num_cpus when joining a cluster


def test_options_are_checked_before_ray_is_imported():
    with pytest.raises(UserError, match="at least 1"):
        RayExecutor(workers=0)
    with pytest.raises(UserError, match="only meaningful with --executor ray"):
        executor_from_options("inprocess", "h:1", 2)
    with pytest.raises(UserError, match="must be inprocess or ray"):
        executor_from_options("dask", None, 2)
    assert executor_from_options("inprocess", None, 2) is None
    assert executor_from_options("ray", "h:1", 5).init_kwargs()["address"] == "h:1"
