"""One local Ray instance for the Ray executor tests, started in the background at collection.

WHY: ``ray.init()`` of a local instance waits ~5 s on a 2-core machine (GCS, API server, raylet and its
two Python agents come up one after another, each polled) and ``ray.shutdown()`` ~1.4 s, most of it
idle waiting: the single largest item of the fast suite. A helper process (ray_head.py) starts the
instance the way ``--executor ray`` does without ``--address`` (``RayExecutor._init``) as soon as
collection has selected a test that needs it, so the start overlaps the tests before it; the test
joins through ``--address`` (the cluster user's path) and its workers are real Ray actors there; the
instance is shut down in the background once the module is done, and awaited at the session's end.

The test's worker module lives in a directory on the instance's PYTHONPATH (made here, filled by the
test) rather than in a job ``runtime_env``: then the two workers Ray starts with the instance
(``RAY_num_prestart_python_workers``) can take the test's actors at once instead of two fresh worker
processes each importing Ray (~1.5 s here). ``RayExecutor``'s ``runtime_env`` is a plain pass-through
to ``ray.init``, checked in tests/unit/runs/test_ray_executor_options.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

# Ray reads RAY_AUTH_MODE once, when ``ray._raylet`` is first imported. A local instance turns token
# authentication on by itself (and exports this same variable to its processes); a driver that joins
# by address uses it only if the variable was set before its import. Nothing else in the tests
# imports ray before this conftest (tests/e2e/runs/test_ray_executor.py is its only user). The token
# is Ray's default file (~/.ray/auth_token), made by the instance if missing, as ``ray.init()`` does.
os.environ.setdefault("RAY_AUTH_MODE", "token")

HEAD_SCRIPT = Path(__file__).with_name("ray_head.py")
FIXTURE = "ray_head"
START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 60


class _Head:
    """The ray_head.py process: started once, its first stdout line read by a thread."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.line: str | None = None
        self.ready = threading.Event()
        self.log = None
        self.code_dir: Path | None = None

    def start(self) -> None:
        if self.proc is not None:
            return
        self.log = tempfile.TemporaryFile()
        self.code_dir = Path(tempfile.mkdtemp(prefix="tb-ray-code-"))
        env = {**os.environ, "RAY_num_prestart_python_workers": "2",
               "PYTHONPATH": os.pathsep.join(p for p in (str(self.code_dir), os.environ.get("PYTHONPATH")) if p)}
        # Its own session: the instance's processes (GCS, raylet, agents, workers) share its group, so a
        # holder that does not stop in time is ended with everything it started, by its own id.
        self.proc = subprocess.Popen([sys.executable, str(HEAD_SCRIPT)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True, env=env)
        threading.Thread(target=self._read_first_line, daemon=True).start()

    def _read_first_line(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        self.line = self.proc.stdout.readline()
        self.ready.set()

    def stderr_tail(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-3000:]

    def address(self) -> tuple[str, int, Path]:
        self.start()
        if not self.ready.wait(START_TIMEOUT_S) or not self.line:
            pytest.fail(f"ray_head.py did not start a Ray instance:\n{self.stderr_tail()}")
        address, cpus = self.line.split()
        assert self.code_dir is not None
        return address, int(cpus), self.code_dir

    def stop(self) -> None:
        """Let the instance shut down (it does when its stdin closes); do not wait here."""
        if self.proc is not None and self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def wait(self) -> None:
        if self.proc is None:
            return
        self.stop()
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.log is not None:
            self.log.close()
        if self.code_dir is not None:
            shutil.rmtree(self.code_dir, ignore_errors=True)
        self.proc = self.code_dir = None


_HEAD = _Head()


def pytest_collection_finish(session):
    """Start the instance now when the selection is the fast suite. Under xdist, or when model tests
    are selected too (``make test``: minutes of model tests would run beside an idle Ray instance),
    the fixture starts it when the test needs it instead."""
    config = session.config
    if config.option.collectonly or hasattr(config, "workerinput"):
        return
    items = session.items
    if any(FIXTURE in getattr(item, "fixturenames", ()) for item in items) and not any(
            item.get_closest_marker("model") for item in items):
        _HEAD.start()


def pytest_sessionfinish(session):
    _HEAD.wait()


@pytest.fixture(scope="module")
def ray_head():
    """``(gcs_address, cpus, code_dir)`` of the background local Ray instance (``code_dir`` is on its
    workers' PYTHONPATH); shut down after the module."""
    yield _HEAD.address()
    _HEAD.stop()


@pytest.fixture
def toy(monkeypatch):
    """The run driver's toy suite (driver_toy_suite.py: no model, a unit squares its number), imported afresh
    from this folder. test_driver_toy_suite.py has its own, which also registers the suite."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))
    sys.modules.pop("driver_toy_suite", None)
    import driver_toy_suite

    return driver_toy_suite

