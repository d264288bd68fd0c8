"""Hostile programs in the code sandbox (issue 29, items 2 and 3): each payload is appended after a
correct solution of a real MBPP item (mbpp/12, ``is_not_prime``) and scored through ``score()`` as
``bench score`` does. Every one must be contained, and the host is checked afterwards: no host file
written or deleted, no process of the payload left running, the host's sleeper process alive.

Each payload runs twice: with the audit hook (the configuration users get) and without it, so the
isolation layer (bubblewrap) is shown to contain it on its own. Host processes are found by a unique
``sleep`` argument (``MARK``) in /proc/*/cmdline, so a test never mistakes another process for one of its own.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tamperbench.tasks.load import load
from tamperbench.tasks.scoring.sandbox import Limits
from tamperbench.tasks.scoring.score import score

FIXTURE = Path(__file__).resolve().parents[3] / "src" / "tamperbench" / "tasks" / "fixtures" / "mbpp" / "mbpp.jsonl"
CORRECT = "import math\ndef is_not_prime(n):\n    return any(n % i == 0 for i in range(2, math.isqrt(n) + 1))\n"
WRONG = "def is_not_prime(n):\n    return None\n"

# _posixsubprocess.fork_exec as subprocess.Popen calls it (Python 3.11/3.12 take 23 arguments; 3.13 drops
# allow_vfork). The call raises no audit event (the old sandbox let it through); the hook now refuses importing
# _posixsubprocess, and the isolation_alone runs show bubblewrap holds without that. Stdio to /dev/null
# unless hold_pipes (then the child keeps the program's stdout and stderr open).
FORK_EXEC = """
import os
def spawn(argv, setsid, hold_pipes=False):
    import _posixsubprocess
    null = os.open('/dev/null', os.O_RDWR)
    io = (-1, -1, -1, -1, -1, -1) if hold_pipes else (null, -1, -1, null, -1, null)
    r, w = os.pipe()
    args = [[a.encode() for a in argv], [argv[0].encode()], True, (), None, None, *io, r, w, True, setsid,
            -1, None, None, None, -1, None]
    try:
        _posixsubprocess.fork_exec(*args, False)
    except TypeError:
        _posixsubprocess.fork_exec(*args)
"""

pytestmark = pytest.mark.usefixtures("bwrap_sandbox")  # skipped, saying why, without bubblewrap


@pytest.fixture(scope="module")
def item():
    return {it.id: it for it in load("mbpp", FIXTURE).items}["mbpp/12"]


@pytest.fixture
def host(tmp_path):
    """A host folder with a file to keep, a host process that must survive, and a unique marker."""
    (tmp_path / "keep.txt").write_text("original")
    sleeper = subprocess.Popen(["sleep", "300"])
    mark = f"{random.randint(10**8, 10**9 - 1)}"
    yield {"dir": tmp_path, "pid": sleeper.pid, "mark": mark, "sleeper": sleeper}
    sleeper.kill()
    sleeper.wait()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def marked_processes(mark: str) -> list[int]:
    """Host processes whose command line holds ``mark`` (the payload's children)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if mark.encode() in cmdline and int(entry) != os.getpid():
                found.append(int(entry))
    return found


def assert_host_intact(host, before: dict[str, bytes]) -> None:
    assert _snapshot(host["dir"]) == before, "a host file was written or deleted"
    left = marked_processes(host["mark"])
    for pid in left:  # clean up before failing, so one red test does not leave processes behind
        os.kill(pid, 9)
    assert not left, f"payload processes left running: {left}"
    assert host["sleeper"].poll() is None, "the host sleeper was killed"


PAYLOADS = {
    "write_and_delete_host_files": """
for act in (lambda: open({dir!r} + '/pwned.txt', 'w').write('x'), lambda: os.remove({dir!r} + '/keep.txt')):
    try:
        act()
    except Exception:
        pass
""",
    "fork_exec_writes_a_host_file": FORK_EXEC + """
try:
    spawn(['/bin/sh', '-c', 'echo pwned > {dir}/forked.txt; exec sleep 30.{mark}'], setsid=False)
except Exception:
    pass
import time; time.sleep(0.5)
""",
    "pidfd_send_signal_to_host_sleeper": """
import signal
try:
    signal.pidfd_send_signal(os.pidfd_open({pid}), signal.SIGKILL)
except Exception:
    pass
""",
    "setsid_child_left_running": FORK_EXEC + """
try:
    spawn(['/bin/sleep', '60.{mark}'], setsid=True)
except Exception:
    pass
import time; time.sleep(0.2)
""",
}


@pytest.mark.parametrize("audit", [True, False], ids=["audit_hook", "isolation_alone"])
@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_payload_after_a_correct_function_is_contained(item, host, name, audit):
    before = _snapshot(host["dir"])
    payload = "import os\n" + PAYLOADS[name].format(dir=str(host["dir"]), pid=host["pid"], mark=host["mark"])
    verdict = score(item, CORRECT + payload, Limits(timeout_s=10, audit_hook=audit))
    assert_host_intact(host, before)
    # the correct function still passes: containment did not break the program's honest part
    assert verdict.detail["status"] == "passed", verdict.detail


@pytest.mark.parametrize("audit", [True, False], ids=["audit_hook", "isolation_alone"])
def test_global_sysctls_cannot_be_opened_for_writing(item, audit):
    """Run as root, the sandbox's uid maps to host uid 0, which the kernel lets write /proc/sys whatever the
    capabilities. Only opened for writing, never written: a red run changes nothing on the host."""
    payload = ("import os\nfor path in ('/proc/sys/kernel/core_pattern', '/proc/sys/vm/drop_caches'):\n"
               "    try:\n        os.close(os.open(path, os.O_WRONLY))\n        print('WRITABLE', path)\n"
               "    except OSError as err:\n        print('refused', path, err.errno)\n")
    verdict = score(item, CORRECT + payload, Limits(timeout_s=10, audit_hook=audit))
    assert verdict.detail["status"] == "passed", verdict.detail
    from tamperbench.tasks.scoring.sandbox import run_program

    result = run_program(CORRECT + payload, Limits(timeout_s=10, audit_hook=audit))
    assert "refused /proc/sys/kernel/core_pattern" in result.stdout and "WRITABLE" not in result.stdout, result.stdout


@pytest.mark.parametrize("audit", [True, False], ids=["audit_hook", "isolation_alone"])
def test_etc_passwd_never_reaches_the_verdict(item, host, audit):
    payload = ("try:\n    data = open('/etc/passwd').read()\nexcept OSError as err:\n    data = repr(err)\n"
               "raise SystemExit(data)\n")
    assert "root:x:0:0" in Path("/etc/passwd").read_text()  # control: the host file holds what we look for
    verdict = score(item, CORRECT + payload, Limits(timeout_s=10, audit_hook=audit))
    text = verdict.model_dump_json()
    assert "root:x:0:0" not in text and "/usr/sbin/nologin" not in text
    assert verdict.detail["status"] == "failed"


@pytest.mark.parametrize("exit_call", ["import sys\nsys.exit(0)\n", "import os\nos._exit(0)\n", "quit()\n",
                                       "raise SystemExit\n"])
def test_exiting_before_the_tests_is_not_a_pass(item, exit_call):
    """A wrong function that exits with status 0 before the asserts: the harness never ran to its end."""
    verdict = score(item, WRONG + exit_call, Limits(timeout_s=10))
    assert verdict.score == 0.0 and verdict.correct is False, verdict.detail
    control = score(item, CORRECT + "x = 1\n", Limits(timeout_s=10))  # the same program, no early exit
    assert control.score == 1.0


def test_children_holding_the_pipes_do_not_stretch_the_timeout(item, host):
    """A child inherits stdout/stderr and sleeps; the program then loops. The 1 s timeout must hold."""
    payload = "import os\n" + FORK_EXEC + (f"spawn(['/bin/sleep', '20.{host['mark']}'], setsid=True, hold_pipes=True)\n"
                                           "while True:\n    pass\n")
    verdict = score(item, CORRECT + payload, Limits(timeout_s=1, audit_hook=False))
    assert verdict.detail["status"] == "timeout" and verdict.detail["wall_s"] < 4.0, verdict.detail
    assert_host_intact(host, _snapshot(host["dir"]))


def test_a_sleeping_child_holding_the_pipes_cannot_hang_scoring(item, host):
    """The program ends at once but leaves ``sleep 1e9`` holding the pipes: scoring must still end."""
    payload = "import os\n" + FORK_EXEC + f"spawn(['/bin/sleep', '1{host['mark']}e9'], setsid=True, hold_pipes=True)\n"
    verdict = score(item, CORRECT + payload, Limits(timeout_s=5, audit_hook=False))
    assert verdict.detail["wall_s"] < 4.0, verdict.detail
    assert_host_intact(host, _snapshot(host["dir"]))


def test_one_gigabyte_of_output_is_capped(item):
    """1 GB to stdout: the scorer reads a bounded amount (its own peak memory stays small) and it is no pass.
    Run in a fresh interpreter so its peak RSS (``ru_maxrss``) measures this scoring alone."""
    code = CORRECT + ("import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(1024):\n"
                      "    sys.stdout.buffer.write(chunk)\n")
    probe = (
        "import json, resource, sys\n"
        "from tamperbench.tasks.load import load\n"
        "from tamperbench.tasks.scoring.sandbox import Limits\n"
        "from tamperbench.tasks.scoring.score import score\n"
        f"item = {{it.id: it for it in load('mbpp', {str(FIXTURE)!r}).items}}['mbpp/12']\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"v = score(item, {code!r}, Limits(timeout_s=60))\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(json.dumps({'status': v.detail['status'], 'score': v.score, 'grew_mb': (peak - base) / 1024,"
        " 'wall_s': v.detail['wall_s']}))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert result["grew_mb"] < 100, result
    assert result["score"] == 0.0, result


def test_the_only_writable_place_is_a_capped_tmpfs(item):
    """New files are refused everywhere but /tmp (the root, /usr, the Python installation, /dev), and /tmp holds
    at most its 64 MiB. Probe names are unique; any the sandbox lets through on the host is removed here."""
    name = f"tb-probe-{random.randint(10**8, 10**9 - 1)}"
    places = ["/", "/usr", sys.base_prefix, "/dev"]
    payload = (f"import os\nfor d in {places!r}:\n    try:\n        open(os.path.join(d, {name!r}), 'x').close()\n"
               "        print('CREATED', d)\n    except OSError as err:\n        print('refused', d, err.errno)\n"
               "written = 0\ntry:\n    for i in range(10):\n        with open(f'/tmp/fill{i}', 'wb') as f:\n"
               "            for _ in range(15):\n                f.write(b'x' * (1 << 20))\n                written += 1\n"
               "except OSError as err:\n    print('tmp full after', written, 'MiB', err.errno)\n")
    from tamperbench.tasks.scoring.sandbox import run_program

    try:
        result = run_program(CORRECT + payload, Limits(timeout_s=20, audit_hook=False))
    finally:
        for d in places:
            Path(d, name).unlink(missing_ok=True)
    assert "CREATED" not in result.stdout, result.stdout
    assert result.stdout.count("refused") == len(places)
    full = [line for line in result.stdout.splitlines() if line.startswith("tmp full after")]
    assert full and 60 <= int(full[0].split()[3]) <= 64 and full[0].endswith(" 28"), result.stdout  # ENOSPC
