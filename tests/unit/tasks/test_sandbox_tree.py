"""Issue 35, High 2: the sandbox bounds the whole process tree, memory and process count, as root too.

A scored program that gets ``fork`` back (here through ctypes and libc, with the audit hook off: the hook is
defence in depth and can be bypassed from Python) forks children that each touch memory. Per-process
RLIMIT_AS does not bound them together, and RLIMIT_NPROC does not bind root (these tests run as root here).

The memory test runs the scoring in a child process placed in a scratch cgroup that this test makes (and
removes) with a 1 GiB ceiling, so that even an unfixed sandbox cannot take more than that from the host; the
scratch cgroup's own peak is the independent measure of what the program's tree took.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tamperbench.tasks.scoring import cgroup
from tamperbench.tasks.scoring.sandbox import Limits, run_program

pytestmark = pytest.mark.usefixtures("bwrap_sandbox")  # skipped, saying why, without bubblewrap

SRC = str(Path(__file__).resolve().parents[3] / "src")

FORK_TOUCH = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None)
n = 0
for i in range({children}):
    pid = libc.fork()
    if pid == 0:
        block = b"x" * ({mb} << 20)   # touched: every page is resident
        time.sleep(60)
        os._exit(0)
    if pid < 0:
        break
    n += 1
print("forked", n, flush=True)
time.sleep(60)
"""


def _own_memory_cgroup() -> Path | None:
    """This process's memory cgroup folder (v1 memory controller, or v2 with memory delegated), or None."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            here = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return here if (here / "memory.limit_in_bytes").exists() else None
    for line in lines:
        if line.startswith("0::"):
            here = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            control = here / "cgroup.subtree_control"
            return here if control.exists() and "memory" in control.read_text().split() else None
    return None


@contextlib.contextmanager
def scratch_cgroup(limit_bytes: int):
    """A memory cgroup of this test's own (a child of this process's), with a ceiling; removed afterwards."""
    parent = _own_memory_cgroup()
    if parent is None or not os.access(parent, os.W_OK):
        pytest.skip("no writable memory cgroup here for the test's scratch ceiling")
    here = parent / f"tamperbench-test-{os.getpid()}-{secrets.token_hex(4)}"
    here.mkdir()
    v1 = (here / "memory.limit_in_bytes").exists()
    try:
        (here / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(str(limit_bytes))
        yield here, (here / ("memory.max_usage_in_bytes" if v1 else "memory.peak"))
    finally:
        for _ in range(500):
            try:
                here.rmdir()
                break
            except OSError:
                time.sleep(0.01)


def _score_in(here: Path, program: str, limits: str) -> dict:
    """Run ``run_program`` in a child Python that first joins the scratch cgroup ``here``."""
    code = ("import json, sys; from dataclasses import asdict\n"
            "from tamperbench.tasks.scoring.sandbox import Limits, run_program\n"
            f"r = run_program(sys.stdin.read(), Limits({limits}))\n"
            "print(json.dumps(asdict(r)))\n")
    out = subprocess.run(["/bin/sh", "-c", 'echo $$ > "$1" && shift && exec "$@"', "join", str(here / "cgroup.procs"),
                          sys.executable, "-c", code], input=program, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": SRC})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_forked_children_touching_memory_are_bounded_together():
    """Twelve children of 50 MB each under --memory-mb 128: the tree never holds more than 128 MB (plus the
    scoring process itself); unbounded, it took the scratch ceiling (1 GiB)."""
    with scratch_cgroup(1 << 30) as (here, peak_file):
        result = _score_in(here, FORK_TOUCH.format(children=12, mb=50),
                           "timeout_s=5, memory_mb=128, max_procs=64, audit_hook=False")
        peak = int(peak_file.read_text())
    # the scratch cgroup held the scoring process (Python, about 20 MB) and the whole sandbox; unbounded,
    # the tree took 625 MB of it (12 children x 50 MB)
    assert peak < (128 + 96) << 20, f"the tree took {peak >> 20} MB"
    assert result["status"] != "passed"
    assert result["tree"]["memory_peak_bytes"] <= 128 << 20
    assert result["tree"]["oom_kills"] >= 1


def test_forks_are_bounded_in_number_as_root():
    """200 sleeping children asked for (no memory touched): at most max_procs tasks exist, bubblewrap's two
    and the program included; the rest of the forks fail, and the kernel counts them."""
    result = run_program(FORK_TOUCH.format(children=200, mb=0), Limits(timeout_s=3, max_procs=16, audit_hook=False))
    forked = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("forked")]
    assert forked and forked[0] <= 16 - 3, result.stdout[-300:]
    assert result.tree is not None and result.tree["forks_refused"] >= 1


def test_no_cgroup_of_the_sandbox_is_left_behind():
    where = cgroup.probe()
    assert not isinstance(where, str), where
    before = {p.name for d in {where.memory, where.pids} for p in d.iterdir() if p.name.startswith(cgroup.PREFIX)}
    run_program(FORK_TOUCH.format(children=5, mb=0), Limits(timeout_s=1, audit_hook=False))
    after = {p.name for d in {where.memory, where.pids} for p in d.iterdir() if p.name.startswith(cgroup.PREFIX)}
    assert not {n for n in after - before if n.startswith(f"{cgroup.PREFIX}{os.getpid()}-")}


MOUNTINFO_V1 = """\
30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
34 30 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 30 0:34 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 30 0:36 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
CGROUP_V1 = "8:pids:/\n4:memory:/process_api/abc\n0::/\n"


def test_hierarchy_detection_from_the_kernel_s_own_text(tmp_path):
    found = cgroup.find(MOUNTINFO_V1, CGROUP_V1)
    assert found == cgroup.Hierarchy(1, Path("/sys/fs/cgroup/memory/process_api/abc"), Path("/sys/fs/cgroup/pids"))
    # v1 without pids: no process-count bound, so none
    no_pids = "\n".join(line for line in MOUNTINFO_V1.splitlines() if "pids" not in line and "cgroup2" not in line)
    assert cgroup.find(no_pids, CGROUP_V1) == "cgroup v1 is mounted without both the memory and pids controllers"
    # v2: delegated or not, read from the process's own cgroup.subtree_control
    (tmp_path / "user.slice").mkdir()
    (tmp_path / "user.slice" / "cgroup.subtree_control").write_text("cpu memory pids\n")
    v2 = f"40 30 0:36 / {tmp_path} rw,relatime - cgroup2 cgroup2 rw\n"
    assert cgroup.find(v2, "0::/user.slice\n") == cgroup.Hierarchy(2, tmp_path / "user.slice", tmp_path / "user.slice")
    (tmp_path / "user.slice" / "cgroup.subtree_control").write_text("cpu memory\n")
    why = cgroup.find(v2, "0::/user.slice\n")
    assert isinstance(why, str) and "does not delegate the pids controller" in why
    assert cgroup.find("", "") == "no cgroup filesystem is mounted"
