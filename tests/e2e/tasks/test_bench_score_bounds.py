"""``tamperbench bench score`` against hostile answers files and programs (issue 29, items 2, 3, 8 and 10).

- Code scoring refuses, in one line naming the package, where bubblewrap is missing or cannot run, unless
  ``--unsafe-no-sandbox``, which every verdict and the summary then name. Real processes: PATH without bwrap,
  and a ``bwrap`` on PATH that fails as one does in a container without user namespaces.
- A console-script run with three hostile programs (a child holding the pipes while the program loops, a
  ``setsid`` child left behind, 1 GB of output) ends within its ``--timeout``, keeps its memory small, and leaves
  no process behind once the CLI has exited.
- Bounds on the answers file: a response over the size cap and a line over the line cap are skipped and counted;
  a line nested 100k deep is skipped and counted instead of aborting the file; bad files are one line, exit 2,
  and nothing is created.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tamperbench.tasks.answers import MAX_LINE_BYTES, MAX_RESPONSE_CHARS

EXE = str(Path(sys.executable).parent / "tamperbench")
FIXTURES = Path(__file__).resolve().parents[3] / "src" / "tamperbench" / "tasks" / "fixtures"
MBPP = FIXTURES / "mbpp" / "mbpp.jsonl"
CORRECT = "import math\ndef is_not_prime(n):\n    return any(n % i == 0 for i in range(2, math.isqrt(n) + 1))\n"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "tasks"))
from test_sandbox_escape import FORK_EXEC, marked_processes  # noqa: E402

SPAWN = FORK_EXEC + """
def try_spawn(*args):
    try:
        spawn(*args)
    except PermissionError:  # the audit hook's refusal (defence in depth): the program goes on
        pass
"""


def _answers(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _cli(args: list, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, "bench", *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


def test_code_scoring_refuses_without_bubblewrap_unless_unsafe(tmp_path):
    answers = _answers(tmp_path, [{"item_id": "mbpp/12", "response": CORRECT}])
    out = tmp_path / "verdicts.jsonl"
    args = ["score", "mbpp", "--data", MBPP, "--answers", answers, "--out", out]
    missing = _cli(args, env={"PATH": str(tmp_path / "empty")})  # a real PATH on which there is no bwrap
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.strip().splitlines() == [
        "error: code scoring runs each program under bubblewrap: bubblewrap (bwrap) is not installed; install it "
        "(apt-get install bubblewrap); or pass --unsafe-no-sandbox to run untrusted programs with rlimits and an "
        "audit hook only"]
    assert not out.exists()
    # a bwrap that cannot create namespaces (as in a container without user namespaces): the same refusal, its why
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    broken = _cli(args, env={"PATH": f"{fake}:/usr/bin:/bin"})
    assert broken.returncode == 2 and len(broken.stderr.strip().splitlines()) == 1
    assert f"{fake}/bwrap cannot create its sandbox here (bwrap: No permissions to create new namespace)" in broken.stderr
    assert not out.exists()
    # the explicit opt-out scores, and says so in every verdict and in the summary
    unsafe = _cli([*args, "--unsafe-no-sandbox"], env={"PATH": str(tmp_path / "empty")})
    assert unsafe.returncode == 0, unsafe.stderr
    verdict = json.loads(out.read_text())
    assert verdict["correct"] is True
    assert verdict["detail"]["sandbox"] == "none (--unsafe-no-sandbox): rlimits and audit hook only"
    assert "sandbox: none (--unsafe-no-sandbox)" in unsafe.stderr
    # benchmarks that run no code need no sandbox
    mc = _answers(tmp_path, [{"item_id": "winogrande/fx-1", "response": "A"}])
    plain = _cli(["score", "winogrande", "--fixture", "--answers", mc], env={"PATH": str(tmp_path / "empty")})
    assert plain.returncode == 0 and "sandbox" not in plain.stderr


LAUNCH = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.usefixtures("bwrap_sandbox")
def test_hostile_programs_through_the_cli(tmp_path):
    """Pipe-holding ``sleep 1e9`` child + busy loop, a ``setsid`` child, 1 GB of output: one run, ``--timeout 2``.
    The old sandbox took 97 s for the first kind at ``--timeout 5``, hung for good on a ``sleep 1e9`` holder,
    left the ``setsid`` child running and grew to 3 GB reading the output. (Here the audit hook refuses the
    spawns before bubblewrap is needed; test_sandbox_escape.py runs the same payloads without the hook.)"""
    mark = str(random.randint(10**8, 10**9 - 1))
    rows = [
        {"item_id": "mbpp/12", "response": CORRECT + SPAWN + f"try_spawn(['/bin/sleep', '1{mark}e9'], True, True)\n"
                                                             "while True:\n    pass\n"},
        {"item_id": "mbpp/12", "response": CORRECT + SPAWN + f"try_spawn(['/bin/sleep', '60.{mark}'], True, False)\n"},
        {"item_id": "mbpp/12", "response": CORRECT + "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(1024):\n"
                                                     "    sys.stdout.buffer.write(chunk)\n"},
    ]
    answers = _answers(tmp_path, rows)
    out = tmp_path / "v.jsonl"
    start = time.monotonic()
    # The CLI's peak memory is read by a small launcher that forks it: a process forked straight from
    # this pytest (which may hold loaded models) inherits pytest's resident size as its own peak.
    rss_file = tmp_path / "maxrss"
    with open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", LAUNCH, str(rss_file), EXE, "bench", "score", "mbpp",
                                 "--data", str(MBPP), "--answers", str(answers), "--out", str(out), "--timeout", "2",
                                 "--workers", "1"],
                                stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        try:
            proc.wait()
        finally:
            left = marked_processes(mark)
            for pid in left:
                os.kill(pid, 9)
    wall = time.monotonic() - start
    assert proc.returncode == 0, (tmp_path / "stderr.txt").read_text()
    assert not left, f"processes of the programs still running after the CLI exited: {left}"
    assert wall < 30, wall  # three programs, the first one at its 2 s timeout, plus interpreter start-ups
    maxrss_kb = int(rss_file.read_text())
    assert maxrss_kb < 600 * 1024, f"peak RSS {maxrss_kb / 1024:.0f} MB"  # the old scorer: 3+ GB
    statuses = [json.loads(line)["detail"]["status"] for line in out.read_text().splitlines()]
    assert statuses == ["timeout", "passed", "output_limit"]


def test_oversized_and_deeply_nested_lines_are_skipped_and_counted(tmp_path, tb_inprocess):
    deep = '{"item_id": "gsm8k/0", "response": ' + "[" * 100_000 + "]" * 100_000 + "}"
    long_line = json.dumps({"item_id": "gsm8k/0", "response": "\\u0041" * 10, "pad": "x" * MAX_LINE_BYTES})
    rows = [json.dumps({"item_id": "gsm8k/0", "response": "#### 26"}), deep,
            json.dumps({"item_id": "gsm8k/0", "response": "x" * (MAX_RESPONSE_CHARS + 1)}), long_line,
            json.dumps({"item_id": "gsm8k/1", "response": "The answer is #### 200"})]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("\n".join(rows) + "\n")
    out = tmp_path / "v.jsonl"
    proc = tb_inprocess("bench", "score", "gsm8k", "--fixture", "--answers", answers, "--out", out)
    assert proc.returncode == 1, proc.stderr
    assert f"{answers}:2: JSON nested too deeply; line skipped" in proc.stderr
    assert (f"{answers}:3: response of {MAX_RESPONSE_CHARS + 1:,} characters is longer than the "
            f"{MAX_RESPONSE_CHARS:,} limit; line skipped") in proc.stderr
    assert f"{answers}:4: line longer than {MAX_LINE_BYTES:,} bytes; line skipped" in proc.stderr
    assert "skipped 3" in proc.stderr and "Traceback" not in proc.stderr
    assert [json.loads(v)["answers_line"] for v in out.read_text().splitlines()] == [1, 5]


@pytest.mark.parametrize("case", ["folder", "not_utf8", "too_large", "out_is_folder", "bad_timeout"])
def test_bad_answers_files_are_one_line_and_create_nothing(tmp_path, tb_inprocess, case):
    answers = tmp_path / "answers.jsonl"
    out = tmp_path / "new" / "v.jsonl"
    extra: list[str] = []
    expect = {"folder": "not a regular file", "not_utf8": "line 2 is not UTF-8 text (byte 0xff at column 1)",
              "too_large": "larger than the 1,073,741,824-byte limit", "out_is_folder": "is a folder",
              "bad_timeout": "--timeout must be in (0, 3600]"}[case]
    if case == "folder":
        answers.mkdir()
    elif case == "not_utf8":
        answers.write_bytes(b'{"item_id": "gsm8k/0", "response": "#### 26"}\n\xff\xfe\n')
    elif case == "too_large":
        with open(answers, "wb") as f:  # sparse: no disk used
            f.truncate((1 << 30) + 1)
    else:
        answers.write_text(json.dumps({"item_id": "gsm8k/0", "response": "#### 26"}) + "\n")
        if case == "out_is_folder":
            out.mkdir(parents=True)
        else:
            extra = ["--timeout", "inf"]
    proc = tb_inprocess("bench", "score", "gsm8k", "--fixture", "--answers", answers, "--out", out, *extra)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], lines
    assert case == "out_is_folder" or not out.parent.exists()
