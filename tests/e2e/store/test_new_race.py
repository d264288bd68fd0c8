"""Issue 15.2: ``--new`` in a second process must not delete a run that a first process is writing.

Two real processes: the first holds the run open through the real store and writes batches; the
second is the real ``tamperbench sleight run --new`` command on the same ``--out``. Before the fix
the second unlinked the first one's database and the first's records were lost.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tamperbench.store import RunStore

HOLDER = textwrap.dedent(
    """
    import sys
    from pydantic import BaseModel
    from tamperbench.store import Record, RunStore, trial_key

    class Spec(BaseModel):
        suite: str = "sleight"
        note: str = "first process"

    class Row(Record):
        value: int

    store = RunStore.open(sys.argv[1], Spec())
    store.write("first_rows", [Row(key=trial_key({"i": i}), value=i) for i in range(3)])
    print("holding", flush=True)
    sys.stdin.readline()
    store.write("first_rows", [Row(key=trial_key({"i": i}), value=i) for i in range(3, 6)])
    store.close()
    print("3 more written", flush=True)
    """
)


@pytest.mark.model
def test_cli_new_cannot_remove_a_run_another_process_writes(tmp_path):
    run = tmp_path / "R"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        second = subprocess.run(
            [sys.executable, "-m", "tamperbench.cli", "sleight", "run", "--out", str(run), "--new",
             "--questions", "1", "--words", "1", "--max-new-tokens", "8", "--device", "cpu"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
        assert second.returncode == 2, second.stderr
        assert "Traceback" not in second.stderr and len(lines) == 1, second.stderr
        assert f"another process (pid {holder.pid}) is writing this run" in lines[0]
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "3 more written"  # the first process carried on
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
    assert not (run / ".superseded").exists()
    with RunStore.open_existing(run, read_only=True) as store:
        assert sorted(r["value"] for r in store.rows("first_rows")) == [0, 1, 2, 3, 4, 5]
        assert store.spec_dict["note"] == "first process"
