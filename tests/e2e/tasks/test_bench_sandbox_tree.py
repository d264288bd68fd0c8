"""Issue 35, High 2, through the CLI: where no cgroup can bound a program's process tree, code scoring
refuses in one line (exit 2) unless ``--unsafe-no-sandbox``.

Real processes: the CLI runs in a private mount namespace (``unshare -m``, so nothing outside it changes)
where an empty tmpfs hides ``/sys/fs/cgroup``, as on a machine without cgroups.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXE = str(Path(sys.executable).parent / "tamperbench")
MBPP = Path(__file__).resolve().parents[3] / "src" / "tamperbench" / "tasks" / "fixtures" / "mbpp" / "mbpp.jsonl"
CORRECT = "import math\ndef is_not_prime(n):\n    return any(n % i == 0 for i in range(2, math.isqrt(n) + 1))\n"


def _without_cgroups(args: list) -> subprocess.CompletedProcess:
    script = 'mount -t tmpfs tamperbench-test-none /sys/fs/cgroup && exec "$@"'
    return subprocess.run(["unshare", "-m", "/bin/sh", "-c", script, "sh", EXE, "bench", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})


@pytest.mark.usefixtures("bwrap_sandbox")
def test_code_scoring_refuses_without_a_cgroup_unless_unsafe(tmp_path):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and util-linux unshare to hide /sys/fs/cgroup in a private mount namespace")
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"item_id": "mbpp/12", "response": CORRECT}) + "\n")
    out = tmp_path / "verdicts.jsonl"
    args = ["score", "mbpp", "--data", MBPP, "--answers", answers, "--out", out]
    refused = _without_cgroups(args)
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: code scoring bounds each program's process tree (memory and process count) with a cgroup: ")
    assert lines[0].endswith("or pass --unsafe-no-sandbox to run untrusted programs with rlimits and an audit hook only")
    assert not out.exists()
    unsafe = _without_cgroups([*args, "--unsafe-no-sandbox"])
    assert unsafe.returncode == 0, unsafe.stderr
    assert json.loads(out.read_text())["correct"] is True
    # with the cgroups in view, the same command scores under both layers, and the summary names them
    plain = subprocess.run([EXE, "bench", *map(str, args)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert plain.returncode == 0, plain.stderr
    assert "sandbox: bubblewrap" in plain.stderr and "+ cgroup v" in plain.stderr
    verdict = json.loads(out.read_text())
    assert verdict["correct"] is True and verdict["detail"]["tree"]["oom_kills"] == 0


def test_max_procs_out_of_range_is_one_line(tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"item_id": "mbpp/12", "response": CORRECT}) + "\n")
    bad = subprocess.run([EXE, "bench", "score", "mbpp", "--data", str(MBPP), "--answers", str(answers),
                          "--max-procs", "2"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --max-procs must be in [4, 4096] (bubblewrap and the program take 3)"]
