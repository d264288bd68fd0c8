"""Run untrusted code (a model's program plus the benchmark's tests) in a sandbox.

Layers, all in force before the program runs any of its code:

- isolation: bubblewrap (bwrap.py says what the program can and cannot see). Required: without it
  :func:`run_program` raises :class:`~tamperbench.tasks.scoring.bwrap.SandboxUnavailable`, unless
  ``Limits(sandboxed=False)`` (the CLI's ``--unsafe-no-sandbox``), which every result then names;
- the whole process tree: a cgroup of its own (cgroup.py) bounds the memory of every process the program
  starts together (``memory_mb``) and their number (``max_procs``, root included); required like bubblewrap;
- wall-clock timeout: the whole sandbox is SIGKILLed (outer ``bwrap``'s process group; its PID namespace dies
  with it), and reading stops there: a child holding the output pipes cannot stretch the timeout;
- output: at most ``output_mb`` is read from stdout and stderr together; past that the sandbox is killed
  (status 'output_limit') and only the last :data:`TAIL` bytes of each are kept in memory;
- CPU seconds (RLIMIT_CPU), address space (RLIMIT_AS), file size (RLIMIT_FSIZE), open files, set by the
  child itself (``_sandbox_child.py``), and an audit hook there refusing sockets, process creation and
  signals: defence in depth behind the isolation layer;
- a pass must be earned: the parent sends the child a random nonce on stdin; the child prints it only when the
  program (its tests last) ran to its end without raising. ``sys.exit(0)`` or ``os._exit(0)`` before the tests
  exits 0 without the nonce: status 'incomplete', not 'passed'.

WHY the child sets its own resource limits rather than a ``preexec_fn`` in the parent: a ``preexec_fn`` forces
``fork()``, which copies the parent's page tables (often a process with torch and a model loaded); without
it ``subprocess`` can ``vfork()``: measured here 64 ms a HumanEval program with it, about half without.

``status``: 'passed' (exit 0 and the nonce), 'incomplete' (exit 0 without the nonce), 'failed' (non-zero exit:
an assertion or an exception), 'timeout', 'output_limit', or 'killed' (a signal, e.g. the CPU limit).
"""

from __future__ import annotations

import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tamperbench.tasks.scoring import bwrap, cgroup

CHILD = Path(__file__).with_name("_sandbox_child.py")
TAIL = 2000  # bytes of stdout and of stderr kept (the end: where a traceback or the nonce is)
UNSAFE = "none (--unsafe-no-sandbox): rlimits and audit hook only"


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0
    memory_mb: int = 1024  # each process's address space (RLIMIT_AS) and the whole tree's memory (cgroup)
    max_procs: int = 16  # processes and threads of the whole tree, bubblewrap's two included (cgroup pids.max)
    cpu_s: int | None = None  # default: timeout rounded up + 1
    file_mb: int = 16
    output_mb: int = 16  # stdout + stderr read from the program before it is killed
    tmpfs_mb: int = 64  # the sandbox's only writable place (/tmp)
    audit_hook: bool = True  # tests turn it off to prove the isolation layer alone contains a program
    sandboxed: bool = True  # False only by the user's explicit --unsafe-no-sandbox


@dataclass(frozen=True)
class RunResult:
    status: str
    returncode: int | None
    wall_s: float
    stdout: str
    stderr: str
    isolation: str  # e.g. 'bubblewrap 0.8.0', or UNSAFE
    output_bytes: int = 0  # stdout + stderr bytes read (at most output_mb, plus one read)
    tree: dict | None = None  # the cgroup's counts: memory_peak_bytes, oom_kills, forks_refused (None unsandboxed)


def _hierarchy() -> cgroup.Hierarchy:
    """The cgroup hierarchy for process trees; otherwise :class:`SandboxUnavailable` in one line saying why."""
    found = cgroup.probe()
    if isinstance(found, str):
        raise bwrap.SandboxUnavailable(
            f"code scoring bounds each program's process tree (memory and process count) with a cgroup: {found}; "
            "or pass --unsafe-no-sandbox to run untrusted programs with rlimits and an audit hook only")
    return found


def isolation_name(limits: Limits) -> str:
    """What will isolate programs under ``limits``; raises SandboxUnavailable when that cannot be had."""
    if not limits.sandboxed:
        return UNSAFE
    version = bwrap.require().version
    return f"{version} + {_hierarchy().name} (tree: {limits.memory_mb} MiB, {limits.max_procs} processes)"


def _rlimits(limits: Limits) -> str:
    """The child's resource limits as one argument, ``cpu_s:address_bytes:file_bytes:open_files``."""
    cpu = limits.cpu_s or int(limits.timeout_s) + 1
    return f"--rlimits={cpu}:{limits.memory_mb * 1024 * 1024}:{limits.file_mb * 1024 * 1024}:64"


def _env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1"}


class _Reader:
    """Read a process's stdout and stderr until both close, the process ends, the deadline or the byte cap."""

    def __init__(self, proc: subprocess.Popen, cap: int):
        self.proc, self.cap, self.total = proc, cap, 0
        self.tails: dict[int, bytearray] = {}
        self.sel = selectors.DefaultSelector()
        for stream in (proc.stdout, proc.stderr):
            assert stream is not None
            os.set_blocking(stream.fileno(), False)
            self.tails[stream.fileno()] = bytearray()
            self.sel.register(stream.fileno(), selectors.EVENT_READ)

    def _drain(self, fd: int) -> bool:
        """Read what is there now; False at end of file."""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return True
            if not chunk:
                self.sel.unregister(fd)
                return False
            self.total += len(chunk)
            tail = self.tails[fd]
            tail += chunk
            del tail[:-TAIL]
            if self.total > self.cap:
                return True

    def _exited(self) -> bool:
        """True once the process has ended (not reaped: its pid, and so its process group, stay reserved)."""
        return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def run(self, deadline: float) -> str:
        """'' when the process ended normally, else 'timeout' or 'output_limit'."""
        while self.sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            for key, _ in self.sel.select(min(remaining, 0.1)):
                self._drain(key.fd)
                if self.total > self.cap:
                    return "output_limit"
            if self.sel.get_map() and self._exited():  # the program is gone; what holds the pipes is not it
                for key in list(self.sel.get_map().values()):
                    self._drain(key.fd)
                break
        return "" if self.total <= self.cap else "output_limit"

    def close(self) -> None:
        self.sel.close()


def _status(code: int, sandboxed: bool, nonce_seen: bool) -> str:
    if code == 0:
        return "passed" if nonce_seen else "incomplete"
    signalled = code < 0 or (sandboxed and code > 128)  # bwrap exits 128 + N when its command dies of signal N
    return "killed" if signalled else "failed"


def run_program(source: str, limits: Limits = Limits()) -> RunResult:
    """Run ``source`` as a Python program under the limits above; never raises for the program's faults
    (raises :class:`~tamperbench.tasks.scoring.bwrap.SandboxUnavailable` when it cannot isolate it)."""
    isolation = isolation_name(limits)
    flags = [_rlimits(limits), *([] if limits.audit_hook else ["--no-audit"])]
    if not limits.sandboxed:
        workdir = Path(tempfile.mkdtemp(prefix="tb-sandbox-"))
        try:
            program = workdir / "program.py"
            program.write_text(source, encoding="utf-8", errors="surrogatepass")
            cmd = [bwrap.base_python(), "-I", "-S", str(CHILD), *flags, str(program)]
            return _run(cmd, str(workdir), _env(str(workdir)), None, None, limits, isolation, None)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    exe = bwrap.require().exe
    tree = cgroup.TreeCgroup(_hierarchy(), limits.memory_mb << 20, limits.max_procs)
    try:
        with tempfile.TemporaryFile() as program_file:  # unnamed; bwrap copies it in as the read-only program
            program_file.write(source.encode("utf-8", "surrogatepass"))
            program_file.seek(0)
            info = os.pipe()
            cmd = [*tree.launcher(), *bwrap.bwrap_argv(exe, limits.tmpfs_mb << 20, str(CHILD), _env("/tmp"),
                                                       program_file.fileno(), info[1]),
                   bwrap.base_python(), "-I", "-S", bwrap.CHILD_IN_SANDBOX, *flags, bwrap.PROGRAM_IN_SANDBOX]
            return _run(cmd, None, {"PATH": "/usr/bin:/bin"}, program_file.fileno(), info, limits, isolation, tree)
    finally:
        tree.remove()  # every process in it is gone by now (the namespace was awaited); what is left is killed


def _run(cmd: list[str], cwd: str | None, env: dict[str, str], program_fd: int | None, info: tuple[int, int] | None,
         limits: Limits, isolation: str, tree: cgroup.TreeCgroup | None) -> RunResult:
    """Start ``cmd``, feed it the nonce, read its output under the limits, and leave nothing of it running.
    ``info``, when given, is a pipe (read, write) whose write end bwrap gets as ``--info-fd``; closed here.
    ``tree``, when given, is the cgroup the command joins first; its counts are read once all is gone."""
    nonce = secrets.token_hex(16)
    start = time.perf_counter()
    deadline = time.monotonic() + limits.timeout_s
    pass_fds = tuple(fd for fd in (program_fd, info[1] if info else None) if fd is not None)
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, pass_fds=pass_fds)
    except BaseException:
        if info:
            os.close(info[0])
        raise
    finally:
        if info:
            os.close(info[1])  # bwrap's copy is then the only write end: its end of file means bwrap is done with it
    reader = _Reader(proc, limits.output_mb << 20)
    init = None
    try:
        if info is not None:
            try:
                init = bwrap.NamespaceInit(info[0], deadline)
            finally:
                os.close(info[0])
        assert proc.stdin is not None
        try:
            proc.stdin.write(nonce.encode() + b"\n")  # 33 bytes: fits the pipe's buffer, never blocks
            proc.stdin.close()
        except BrokenPipeError:
            pass
        stopped = reader.run(deadline)
    finally:
        if init is not None:
            init.kill_and_wait()  # the namespace and everything in it: gone when this returns
        try:  # the whole group: outer bwrap or, unsandboxed, the child and what it left in its group
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        reader.close()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    wall = time.perf_counter() - start
    out, err = (bytes(tail) for tail in reader.tails.values())  # registered stdout first, then stderr
    marker = f"\n{nonce}\n".encode()
    seen = out.endswith(marker)
    if seen:
        out = out[: -len(marker)]
    status = stopped or _status(proc.returncode, limits.sandboxed, seen)
    return RunResult(status, proc.returncode, wall, out.decode("utf-8", "replace"),
                     err.decode("utf-8", "replace"), isolation, reader.total, tree.stats() if tree else None)
