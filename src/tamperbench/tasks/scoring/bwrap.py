"""The isolation layer of the code sandbox: bubblewrap (``bwrap``, Debian package ``bubblewrap``).

WHY bubblewrap and not only the audit hook: an audit hook cannot contain Python (``_posixsubprocess.fork_exec``
raises no audit event; ``open`` and ``os.remove`` are ordinary file use; ``signal.pidfd_send_signal`` reaches any
process by pid). The kernel's namespaces can. Each program gets:

- its own PID namespace (``--unshare-all``), whose init is bubblewrap's reaper: when the program ends, or when
  the parent kills the outer ``bwrap``, the kernel kills every process left in it (``--die-with-parent``);
  host processes are not visible, so no pid or pidfd reaches them;
- no network (a fresh, empty network namespace), no IPC or UTS sharing, and a new session (``--new-session``:
  no ``TIOCSTI`` into the caller's terminal);
- a user namespace in which it runs as uid/gid 65534 with every capability dropped, and cannot make another;
- a filesystem made only of read-only binds of ``/usr`` (with the ``/bin``, ``/lib``, ``/lib64`` links) and the
  Python installation, and a minimal read-only ``/dev``. No ``/etc``, no home, no project folder: host files
  are not there to read or write. The one writable place is a size-capped tmpfs at ``/tmp`` (the working
  directory); the root is remounted read-only;
- no ``/proc``. WHY: when tamperbench runs as root, bubblewrap maps the sandbox's uid 65534 to host uid 0, and
  the kernel lets host uid 0 open global sysctls under ``/proc/sys`` for writing whatever the capabilities
  (measured here: ``kernel/core_pattern`` was writable from inside with a fresh ``/proc`` mounted). Python and
  the benchmarks' programs do not need ``/proc``; the test suite checks it stays out of reach;
- the interpreter's standard library only: ``python -I -S`` on the base installation (not the virtualenv),
  so a verdict does not depend on what else is installed.

Without bubblewrap, or where it cannot create its namespaces, scoring refuses (one line naming the package)
unless the user passes ``--unsafe-no-sandbox``; sandbox.py then runs the program with rlimits and the audit
hook only, and every verdict says so.
"""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tamperbench.errors import UserError

INSTALL_HINT = "apt-get install bubblewrap"
CHILD_IN_SANDBOX = "/run/tamperbench/child.py"
PROGRAM_IN_SANDBOX = "/run/tamperbench/program.py"


class SandboxUnavailable(UserError):
    """Code scoring was asked for and the isolation layer is missing or unusable."""


@dataclass(frozen=True)
class Bwrap:
    exe: str
    version: str


def base_python() -> str:
    """The base interpreter (not the virtualenv's link), so only its installation needs binding."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _ro_binds() -> list[str]:
    """``--ro-bind`` arguments for /usr, the merged-/usr links and the Python installation."""
    args = ["--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):
        host = Path("/") / link
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    seen: list[str] = ["/usr"] + [f"/{x}" for x in ("bin", "lib", "lib64", "sbin")]
    for path in (sys.base_prefix, sys.base_exec_prefix, str(Path(base_python()).parent)):
        real = os.path.realpath(path)
        if not any(real == s or real.startswith(s.rstrip("/") + "/") for s in seen):
            args += ["--ro-bind", real, real]
            seen.append(real)
    return args


def bwrap_argv(exe: str, tmpfs_bytes: int, child: str, env: dict[str, str], program_fd: int | None = None,
               info_fd: int | None = None) -> list[str]:
    """The ``bwrap`` command line up to ``--``; the caller appends the command to run inside.

    ``program_fd`` (a readable file descriptor, passed to bwrap) becomes the read-only program file; the
    child script is bound read-only from the package; bwrap writes the namespace init's pid to ``info_fd``.
    Order matters: mounts first, ``--remount-ro /`` last."""
    args = [exe, *_ro_binds(), "--ro-bind", child, CHILD_IN_SANDBOX]
    if program_fd is not None:
        args += ["--ro-bind-data", str(program_fd), PROGRAM_IN_SANDBOX]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    args += ["--size", str(tmpfs_bytes), "--tmpfs", "/tmp", "--dev", "/dev",
             "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp",
             "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534", "--disable-userns",
             "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--"]


@functools.lru_cache(maxsize=1)
def probe() -> Bwrap | str:
    """The usable bubblewrap, or one line saying why there is none (checked once per process)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return f"bubblewrap (bwrap) is not installed; install it ({INSTALL_HINT})"
    child = str(Path(__file__).with_name("_sandbox_child.py"))
    cmd = [*bwrap_argv(exe, 1 << 20, child, {"PATH": "/usr/bin:/bin"}), base_python(), "-I", "-S", "-c", ""]
    try:
        out = subprocess.run(cmd, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{exe} cannot be run here ({err})"
    if out.returncode != 0:
        why = (out.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit status {out.returncode}"])[0]
        return f"{exe} cannot create its sandbox here ({why[:200]})"
    return Bwrap(exe, version or "bubblewrap")


def require() -> Bwrap:
    """The usable bubblewrap; otherwise :class:`SandboxUnavailable` in one line naming the package and the opt-out."""
    found = probe()
    if isinstance(found, str):
        raise SandboxUnavailable(f"code scoring runs each program under bubblewrap: {found}; or pass "
                                 "--unsafe-no-sandbox to run untrusted programs with rlimits and an audit hook only")
    return found


class NamespaceInit:
    """The PID namespace's init (bubblewrap's reaper), held by a pidfd, so the sandbox's end can be awaited.

    WHY: the outer ``bwrap`` exits as soon as its init reports the program's exit status, before the kernel
    has killed the rest of the namespace; the init itself exits only after every process in the namespace
    is gone (``zap_pid_ns_processes``), and its pidfd turns readable then. Awaiting it makes "scoring
    returned" mean "nothing of the program is left running"."""

    def __init__(self, info_read_fd: int, deadline: float):
        self.pidfd: int | None = None
        data, info = b"", None
        while info is None and time.monotonic() < deadline:  # bwrap writes {"child-pid": N, ...}
            ready, _, _ = select.select([info_read_fd], [], [], max(deadline - time.monotonic(), 0))
            chunk = os.read(info_read_fd, 4096) if ready else b""
            if not chunk:
                break
            data += chunk
            try:
                info = json.loads(data)
            except ValueError:
                continue  # not all of it yet
        try:
            self.pidfd = os.pidfd_open(int(info["child-pid"]))  # type: ignore[index]
        except (ValueError, KeyError, TypeError, OSError):
            self.pidfd = None  # bwrap failed before starting the namespace: nothing to await

    def kill_and_wait(self, timeout_s: float = 5.0) -> None:
        if self.pidfd is None:
            return
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        select.select([self.pidfd], [], [], timeout_s)
        os.close(self.pidfd)
        self.pidfd = None
