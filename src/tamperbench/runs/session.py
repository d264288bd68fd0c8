"""What one process computed a run's records with, beyond the model's provenance: a row of the run's
``sessions`` table per process and model.

WHY a table apart from the provenance: the number of torch threads changes the bits a CPU computes (it
changes the order of every matmul's sums), and sampling turns those bits into other text. Exact Words'
`standard` preset at `--sampling paper` on the embedded model, rerun with the stored run's settings:
222 of 222 answers identical under one thread (the stored run's), 29 of 222 different under two, where a
long high-entropy sample meets a near tie (every class the same). Yet the thread count cannot enter the
provenance id: the id is part of every trial key, and a run resumed on a machine with other cores must
keep its stored trials. So each process that writes to a run records what it ran with here, with the
time it started: a record's ``created_at`` says which session computed it.

With ``--executor ray`` the rows describe the driving process; the workers' settings are their own.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import platform
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

# environment variables that change what a CPU or GPU computes, or how much of it runs at once
ENV_RECORDED = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
                "CUBLAS_WORKSPACE_CONFIG", "TAMPERBENCH_SHARED_PREFIX_ATTENTION", "TAMPERBENCH_PACKED_LINEAR")

_STARTED = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
_SESSION = uuid.uuid4().hex[:16]


@functools.cache
def _checkout() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout tamperbench is imported from; (None, None) for an installed
    wheel (also one installed into a virtual environment inside some other git repository: this file must be
    tracked by the repository found), or when git is absent or slow."""
    here = Path(__file__).resolve().parent
    if not any((p / ".git").exists() for p in here.parents):
        return None, None
    try:
        subprocess.run(["git", "-C", str(here), "ls-files", "--error-unmatch", Path(__file__).name],
                       capture_output=True, timeout=5, check=True)
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here.parent), "status", "--porcelain", "--untracked-files=no", "--",
                                "."],  # the whole package: an edit anywhere in it changes what a run computes
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return None, None
    return (head or None), (dirty if head else None)


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:  # read only
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def session_record(provenance_id: str) -> dict[str, Any]:
    """This process's settings for the model named by ``provenance_id``: ``session`` names the process,
    ``started_at`` when it imported tamperbench, ``recorded_at`` when it opened the run. Torch's thread counts only when
    this process has imported torch (a served model's client never does: importing it here would cost
    seconds and say nothing)."""
    torch = sys.modules.get("torch")
    import tamperbench

    commit, dirty = _checkout()
    return {
        "session": _SESSION,
        "started_at": _STARTED,
        "recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "provenance_id": provenance_id,
        "pid": os.getpid(),
        "argv": [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv else [],
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "torch_interop_threads": torch.get_num_interop_threads() if torch is not None else None,
        "env": {k: os.environ[k] for k in ENV_RECORDED if k in os.environ},
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "tamperbench_version": tamperbench.__version__,
        "tamperbench_commit": commit,
        "tamperbench_dirty": dirty,
    }
