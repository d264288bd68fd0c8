"""Run untrusted code (a model's program plus the benchmark's tests) in a limited subprocess.

Limits, all in force before the program runs any of its code:

- wall-clock timeout: the whole process group is SIGKILLed (an infinite loop cannot outlive it);
- CPU seconds (RLIMIT_CPU), address space (RLIMIT_AS), file size (RLIMIT_FSIZE), open files;
- no network: a fresh network namespace via ``unshare -n`` when we are root and it works here,
  and in every case an audit hook in the child that refuses socket use and process creation
  (see ``_sandbox_child.py``);
- a fresh temporary working directory, removed afterwards; ``python -I`` (no user site,
  no PYTHON* environment), a minimal environment.

WHY the child sets its own resource limits (``_sandbox_child.py``, first thing, before the program is
read) rather than a ``preexec_fn`` in the parent: a ``preexec_fn`` forces ``fork()``, which copies the
parent's page tables, and the parent is often a process with torch and a model loaded. Measured here
with torch imported in the parent: 64 ms a HumanEval program with the ``preexec_fn``, about half
without it, where ``subprocess`` can ``vfork()``. The limits the program meets are the same, and they
are in force before any of its code runs (tests/unit/bench/test_bench_sandbox.py reads them back).

``status`` is 'passed' (exit 0), 'failed' (non-zero exit: an assertion or an exception),
'timeout' (killed at the wall-clock limit) or 'killed' (a signal, e.g. the CPU or memory limit).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CHILD = Path(__file__).with_name("_sandbox_child.py")
TAIL = 2000


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0
    memory_mb: int = 1024
    cpu_s: int | None = None  # default: timeout rounded up + 1
    file_mb: int = 16
    audit_hook: bool = True  # tests turn it off to prove the network namespace alone blocks


@dataclass(frozen=True)
class RunResult:
    status: str
    returncode: int | None
    wall_s: float
    stdout: str
    stderr: str
    network_isolation: str  # 'netns+audit' or 'audit'


@functools.lru_cache(maxsize=1)
def netns_available() -> bool:
    """True when ``unshare -n`` works here (root with CAP_SYS_ADMIN, not blocked by the container)."""
    exe = shutil.which("unshare")
    if exe is None or os.geteuid() != 0:
        return False
    try:
        return subprocess.run([exe, "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _rlimits(limits: Limits) -> str:
    """The child's resource limits as one argument, ``cpu_s:address_bytes:file_bytes:open_files``."""
    cpu = limits.cpu_s or int(limits.timeout_s) + 1
    return f"--rlimits={cpu}:{limits.memory_mb * 1024 * 1024}:{limits.file_mb * 1024 * 1024}:64"


def run_program(source: str, limits: Limits = Limits()) -> RunResult:
    """Run ``source`` as a Python program under the limits above; never raises for the program's faults."""
    workdir = Path(tempfile.mkdtemp(prefix="tb-sandbox-"))
    try:
        program = workdir / "program.py"
        program.write_text(source, encoding="utf-8")
        cmd = [sys.executable, "-I", str(CHILD), _rlimits(limits), *([] if limits.audit_hook else ["--no-audit"]),
               str(program)]
        isolation = "audit"
        if netns_available():
            cmd = [shutil.which("unshare") or "unshare", "-n", "--", *cmd]
            isolation = "netns+audit"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=limits.timeout_s)
            status = "passed" if proc.returncode == 0 else "killed" if proc.returncode < 0 else "failed"
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
            status = "timeout"
        wall = time.perf_counter() - start
        return RunResult(status, proc.returncode, wall, out.decode("utf-8", "replace")[-TAIL:],
                         err.decode("utf-8", "replace")[-TAIL:], isolation)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
