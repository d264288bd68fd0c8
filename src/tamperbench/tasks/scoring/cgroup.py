"""Bound a sandboxed program's whole process tree, memory and process count, with a cgroup of its own.

WHY a cgroup: RLIMIT_AS bounds one process's address space, not a tree's: a program that gets ``fork``
back (the audit hook is defence in depth, not a wall: ctypes reaches libc's ``fork``) forks children that
each have the whole limit. RLIMIT_NPROC does not help either: it counts every process of the real user id,
and the kernel does not apply it to root at all, and when tamperbench runs as root the sandbox's uid 65534
is host uid 0. A cgroup's ``pids.max`` and memory limit hold for every process in it, root included, and
cgroup membership is inherited by every child, so the whole tree is bounded whatever it does.
(A seccomp filter refusing ``fork``/``clone`` would bound the count without a cgroup, but then a single
process's RLIMIT_AS is the only memory bound, and it needs a BPF program built by hand or a libseccomp
binding; the cgroup bounds both with the kernel's own accounting.)

What is used, found by reading ``/proc/self/mountinfo`` and ``/proc/self/cgroup``, never assumed:

- cgroup v1 with both the ``memory`` and ``pids`` controllers mounted (each a hierarchy of its own), or
- cgroup v2 (``cgroup2``) where this process's cgroup delegates ``memory`` and ``pids`` to its children
  (both listed in its ``cgroup.subtree_control``; tamperbench never changes a cgroup it did not create).

Each program gets a new child of this process's own cgroup, named ``tamperbench-sandbox-PID-RANDOM``,
removed when the program is gone. Nothing else is created, written or removed. Where none can be had,
:func:`probe` says why in one line and scoring refuses (``bwrap.require``) unless ``--unsafe-no-sandbox``.
"""

from __future__ import annotations

import functools
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "tamperbench-sandbox-"
JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n - 1)); done; exec "$@"'


@dataclass(frozen=True)
class Hierarchy:
    """Where this process's children cgroups go: v1 a (memory, pids) pair of folders, v2 one folder."""

    version: int
    memory: Path
    pids: Path

    @property
    def name(self) -> str:
        return f"cgroup v{self.version}"


def _mounts(text: str) -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root inside the hierarchy, fs type, super options) of each cgroup mount in mountinfo."""
    found = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4].replace("\\040", " "), fields[3], tail[0], set(tail[2].split(","))))
    return found


def _own(text: str) -> dict[str, str]:
    """Controller (or '' for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    own = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for ctrl in parts[1].split(",") if parts[1] else [""]:
                own[ctrl] = parts[2]
    return own


def _under(mount: str, root: str, path: str) -> Path:
    rel = path[len(root):] if root != "/" and path.startswith(root) else path
    return Path(mount) / rel.lstrip("/")


def find(mountinfo: str, proc_cgroup: str) -> Hierarchy | str:
    """The hierarchy to make children in, or one line saying why there is none (pure: tests feed it text)."""
    mounts, own = _mounts(mountinfo), _own(proc_cgroup)
    v1 = {ctrl: (m, r) for m, r, fs, opts in mounts if fs == "cgroup" for ctrl in ("memory", "pids") if ctrl in opts}
    if "memory" in v1 and "pids" in v1 and "memory" in own and "pids" in own:
        return Hierarchy(1, _under(*v1["memory"], own["memory"]), _under(*v1["pids"], own["pids"]))
    v2 = [(m, r) for m, r, fs, _ in mounts if fs == "cgroup2"]
    if v2 and "" in own:
        here = _under(*v2[0], own[""])
        try:
            delegated = set((here / "cgroup.subtree_control").read_text().split())
        except OSError as err:
            return f"cannot read {here}/cgroup.subtree_control ({err.strerror or err})"
        if {"memory", "pids"} <= delegated:
            return Hierarchy(2, here, here)
        missing = " and ".join(sorted({"memory", "pids"} - delegated))
        return (f"this process's cgroup v2 ({here}) does not delegate the {missing} controller to its children "
                "(run under a delegated cgroup, e.g. systemd-run --user --scope -p Delegate=yes)")
    if v1:
        return "cgroup v1 is mounted without both the memory and pids controllers"
    return "no cgroup filesystem is mounted"


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


class TreeCgroup:
    """One program's cgroup: made with its limits, joined by the launcher (:meth:`launcher`), removed by :meth:`remove`."""

    def __init__(self, where: Hierarchy, memory_bytes: int, max_procs: int):
        self.where = where
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        self.dirs: list[Path] = []
        try:
            for parent in dict.fromkeys((where.memory, where.pids)):  # one folder in v2, two in v1
                (parent / name).mkdir(mode=0o700)
                self.dirs.append(parent / name)
            mem, pids = where.memory / name, where.pids / name
            if where.version == 1:
                _write(mem / "memory.limit_in_bytes", str(memory_bytes))
                if (mem / "memory.memsw.limit_in_bytes").exists():  # swap too, where it is accounted
                    _write(mem / "memory.memsw.limit_in_bytes", str(memory_bytes))
            else:
                _write(mem / "memory.max", str(memory_bytes))
                if (mem / "memory.swap.max").exists():
                    _write(mem / "memory.swap.max", "0")
                _write(mem / "memory.oom.group", "1")  # an out-of-memory kill takes the whole tree
            _write(pids / "pids.max", str(max_procs))
        except BaseException:
            self.remove()
            raise
        self.mem, self.pids = mem, pids

    def launcher(self) -> list[str]:
        """A command prefix that moves itself into this cgroup, then execs the rest: every process the command
        starts is born inside, before the program's first line."""
        procs = [str(d / "cgroup.procs") for d in self.dirs]
        return ["/bin/sh", "-c", JOIN, "tamperbench-join", str(len(procs)), *procs]

    def stats(self) -> dict[str, int]:
        """Peak memory of the tree (bytes), out-of-memory kills and refused forks, as the kernel counted them."""
        def read(path: Path) -> str:
            try:
                return path.read_text()
            except OSError:
                return ""

        def counter(text: str, key: str) -> int:
            for line in text.splitlines():
                k, _, v = line.partition(" ")
                if k == key and v.strip().isdigit():
                    return int(v)
            return 0

        peak_file = "memory.max_usage_in_bytes" if self.where.version == 1 else "memory.peak"
        events = "memory.oom_control" if self.where.version == 1 else "memory.events"
        peak = read(self.mem / peak_file).strip()
        return {"memory_peak_bytes": int(peak) if peak.isdigit() else -1,
                "oom_kills": counter(read(self.mem / events), "oom_kill"),
                "forks_refused": counter(read(self.pids / "pids.events"), "max")}

    def remove(self, timeout_s: float = 5.0) -> None:
        """Kill whatever is left in it (only the program's own processes can be there), then remove it."""
        deadline = time.monotonic() + timeout_s
        for d in reversed(self.dirs):
            while d.exists():
                try:
                    d.rmdir()
                except OSError:
                    try:
                        pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
                    except (OSError, ValueError):
                        pids = []
                    for pid in pids:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)


@functools.lru_cache(maxsize=1)
def probe() -> Hierarchy | str:
    """The usable hierarchy, or one line saying why there is none; checked once per process by making (and
    removing) one cgroup with limits, as scoring will."""
    try:
        found = find(Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text())
    except OSError as err:
        return f"cannot read /proc/self ({err.strerror or err})"
    if isinstance(found, str):
        return found
    try:
        TreeCgroup(found, 64 << 20, 8).remove()
    except OSError as err:
        return f"cannot create a cgroup under {found.memory} ({err.strerror or err})"
    return found
