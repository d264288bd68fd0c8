"""The code sandbox: timeout kill, no network, memory limit, temporary working directory.

Hostile programs (host files, processes, signals, early exits, output floods): test_sandbox_escape.py."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

from tamperbench.tasks.scoring.sandbox import UNSAFE, Limits, run_program

pytestmark = pytest.mark.usefixtures("bwrap_sandbox")  # skipped, saying why, without bubblewrap


@pytest.fixture
def listening_port():
    """A real TCP server on 127.0.0.1 that accepts connections (so a refused connect is the sandbox's doing)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def accept():
        server.settimeout(0.02)  # how long the teardown's join may wait
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


RAW_CONNECT = "import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('127.0.0.1', {port}))\nprint('connected')\n"
CONNECT = "import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')\n"


def test_control_connect_works_outside_the_sandbox(listening_port):
    """Without the sandbox the same program connects: the refusal below is not an artefact of the test."""
    out = subprocess.run([sys.executable, "-c", CONNECT.format(port=listening_port)], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0 and "connected" in out.stdout


def test_network_refused(listening_port):
    result = run_program(CONNECT.format(port=listening_port), Limits(timeout_s=20))
    assert result.status == "failed" and "connected" not in result.stdout
    assert "PermissionError: sandbox: socket.getaddrinfo is not allowed" in result.stderr
    raw = run_program(RAW_CONNECT.format(port=listening_port), Limits(timeout_s=20))  # no name lookup: connect itself
    assert raw.status == "failed" and "PermissionError: sandbox: socket.connect is not allowed" in raw.stderr


def test_network_namespace_alone_refuses(listening_port):
    """With the audit hook switched off, bubblewrap's empty network namespace still blocks the connection
    (and without the sandbox the same program connects: the control, so the refusal is the namespace's)."""
    result = run_program(CONNECT.format(port=listening_port), Limits(timeout_s=20, audit_hook=False))
    assert result.isolation.startswith("bubblewrap")
    assert result.status == "failed" and "connected" not in result.stdout
    assert "OSError" in result.stderr or "Network is unreachable" in result.stderr or "refused" in result.stderr
    unsafe = run_program(CONNECT.format(port=listening_port), Limits(timeout_s=20, audit_hook=False, sandboxed=False))
    assert unsafe.isolation == UNSAFE and unsafe.status == "passed" and "connected" in unsafe.stdout


def test_infinite_loop_killed_at_timeout():
    start = time.perf_counter()
    result = run_program("while True:\n    pass\n", Limits(timeout_s=0.25))
    elapsed = time.perf_counter() - start
    # SIGKILL either way: -9 when the sandbox's init was killed first, 137 (128 + 9) when bubblewrap
    # reports the program's own SIGKILL (which one wins depends on timing, e.g. on a loaded machine)
    assert result.status == "timeout" and result.returncode in (-9, 137)
    assert 0.25 <= elapsed < 5.0


def test_sleeping_child_cannot_outlive_timeout():
    """A program that sleeps (no CPU use, so RLIMIT_CPU never fires) is still killed at the wall clock."""
    result = run_program("import time\ntime.sleep(60)\n", Limits(timeout_s=0.25))
    assert result.status == "timeout" and result.wall_s < 5.0


def test_memory_limit():
    result = run_program("x = bytearray(600 * 1024 * 1024)\nprint('allocated')\n", Limits(timeout_s=20, memory_mb=256))
    assert result.status == "failed" and "MemoryError" in result.stderr and "allocated" not in result.stdout


def test_the_program_meets_every_resource_limit_hard_and_soft():
    """The child sets the limits before the program's first line: read back from inside the program, each
    is the one asked for (CPU = timeout rounded up + 1), hard equal to soft."""
    probe = ("import resource\nfor name in ('CPU', 'AS', 'FSIZE', 'NOFILE', 'CORE'):\n"
             "    print(name, *resource.getrlimit(getattr(resource, 'RLIMIT_' + name)))\n")
    result = run_program(probe, Limits(timeout_s=3.5, memory_mb=300, file_mb=5))
    assert result.status == "passed", result.stderr
    assert result.stdout.split("\n")[:5] == ["CPU 4 4", f"AS {300 << 20} {300 << 20}", f"FSIZE {5 << 20} {5 << 20}",
                                             "NOFILE 64 64", "CORE 0 0"]
    assert run_program(probe, Limits(timeout_s=20, cpu_s=7)).stdout.startswith("CPU 7 7\n")


def test_processes_refused_and_workdir_is_temporary():
    result = run_program("import os\nos.posix_spawn('/bin/true', ['true'], {})\n", Limits(timeout_s=20))
    assert result.status == "failed" and "os.posix_spawn is not allowed" in result.stderr
    # the working directory is the sandbox's own tmpfs: a file written there never reaches the host's /tmp
    name = f"tb-scratch-{time.time_ns()}.txt"
    where = run_program(f"import os\nprint(os.getcwd())\nopen({name!r}, 'w').write('x')\n", Limits(timeout_s=20))
    assert where.status == "passed" and where.stdout.strip() == "/tmp"
    import os

    assert not os.path.exists(f"/tmp/{name}")
    # unsandboxed (--unsafe-no-sandbox): a fresh host folder, removed afterwards
    unsafe = run_program("import os\nprint(os.getcwd())\nopen('scratch.txt', 'w').write('x')\n",
                         Limits(timeout_s=20, sandboxed=False))
    workdir = unsafe.stdout.strip()
    assert unsafe.status == "passed" and "tb-sandbox-" in workdir
    assert not os.path.exists(workdir)


def test_passing_and_failing_programs():
    assert run_program("assert 1 + 1 == 2\n").status == "passed"
    failed = run_program("assert 1 + 1 == 3\n")
    assert failed.status == "failed" and "AssertionError" in failed.stderr
    # the program runs as __main__, and its globals are that module's (as with `python program.py`)
    as_main = run_program("import sys\nx = 1\nif __name__ == '__main__' and sys.modules['__main__'].x == 1:\n"
                          "    raise SystemExit(3)\n")
    assert as_main.status == "failed" and as_main.returncode == 3
