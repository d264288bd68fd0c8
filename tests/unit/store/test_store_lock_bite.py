"""The run directory's writer lock and preflight, at the edges a mutant could slip through: nested
creation, the lock file's mode, what the refusal says when the holder's pid is missing, too long
or not ASCII, and preflight against a lock held elsewhere, held by us, or free. A second holder is
simulated with a second open file description in this process (flock conflicts between those
exactly as between processes); no model, no browser."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

import pytest

from tamperbench.errors import UserError
from tamperbench.store import lock


@pytest.fixture
def held(tmp_path):
    """A run directory whose lock another holder has, with the given lock-file content."""
    fds = []

    def make(content: bytes):
        run = tmp_path / "run"
        run.mkdir(exist_ok=True)
        fd = os.open(run / lock.LOCK_FILE, os.O_RDWR | os.O_CREAT)
        os.ftruncate(fd, 0)
        os.pwrite(fd, content, 0)
        fcntl.flock(fd, fcntl.LOCK_EX)
        fds.append(fd)
        return run

    yield make
    for fd in fds:
        os.close(fd)


def test_acquire_creates_nested_directories_and_a_0644_lock_file(tmp_path):
    run = tmp_path / "a" / "b" / "run"
    key = lock.acquire(run)
    try:
        mask = os.umask(0)
        os.umask(mask)
        assert stat.S_IMODE((run / lock.LOCK_FILE).stat().st_mode) == 0o644 & ~mask
        assert (run / lock.LOCK_FILE).read_text() == f"{os.getpid()}\n"
    finally:
        lock.release(key)


def test_acquire_overwrites_a_stale_longer_pid(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / lock.LOCK_FILE).write_text("123456789012345\n")  # left by a dead holder: no flock on it
    key = lock.acquire(run)
    try:
        assert (run / lock.LOCK_FILE).read_text() == f"{os.getpid()}\n"
    finally:
        lock.release(key)


@pytest.mark.parametrize("content,shown", [
    (b"", "unknown"), (b"  \n", "unknown"), (b"77\n", "77"),
    (b"1" * 40, "1" * 32),  # at most 32 bytes of a foreign file are read
    (b"\xff9\n", "\ufffd9"),  # not ASCII: replaced, never a decode error
])
def test_acquire_refusal_names_the_holder_as_found(held, content, shown):
    run = held(content)
    with pytest.raises(UserError) as err:
        lock.acquire(run)
    assert str(err.value) == (f"{run}: another process (pid {shown}) is writing this run; "
                              "wait for it to finish or use another --out")


@pytest.mark.parametrize("content,shown", [(b"", "unknown"), (b"4242\n", "4242"), (b"\xfe1", "\ufffd1"),
                                          (b"2" * 40, "2" * 32)])
def test_preflight_refuses_a_run_held_elsewhere_with_the_same_line(held, content, shown):
    run = held(content)
    with pytest.raises(UserError) as err:
        lock.preflight(run)
    assert str(err.value) == (f"{run}: another process (pid {shown}) is writing this run; "
                              "wait for it to finish or use another --out")


def test_preflight_passes_a_run_we_hold_and_a_free_one_and_leaves_no_file(tmp_path):
    run = tmp_path / "run"
    key = lock.acquire(run)
    try:
        lock.preflight(run)  # our own lock: re-entrant, not "another process"
    finally:
        lock.release(key)
    lock.preflight(run)  # lock file present but free
    assert sorted(p.name for p in run.iterdir()) == [lock.LOCK_FILE]  # the probe file is gone
    # the probe lock was released: another holder can take it at once
    fd = os.open(run / lock.LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    fresh = tmp_path / "x" / "y"
    lock.preflight(fresh)  # new: probed in the nearest existing ancestor, nothing created
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_preflight_exact_lines_for_a_file_in_the_way(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(UserError) as err:
        lock.preflight(f)
    assert str(err.value) == f"{f}: exists and is not a directory"
    with pytest.raises(UserError) as err:
        lock.preflight(f / "run")
    assert str(err.value) == f"{f / 'run'}: cannot write here ({f} is not a directory)"


def test_preflight_where_nothing_can_be_created_is_one_line():
    # /proc refuses new files even to root (os.access would say yes)
    run = Path("/proc/tb-preflight-probe/run")
    with pytest.raises(UserError) as err:
        lock.preflight(run)
    assert str(err.value).startswith(f"{run}: cannot write here (")


def test_release_of_the_last_holder_unlocks_for_others(tmp_path):
    run = tmp_path / "run"
    key = lock.acquire(run)
    lock.acquire(run)
    lock.release(key)
    fd = os.open(run / lock.LOCK_FILE, os.O_RDWR)
    try:
        with pytest.raises(OSError):  # still held once
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.release(key)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # now free
    finally:
        os.close(fd)


def test_preflight_in_a_deleted_working_directory_is_refused(tmp_path, monkeypatch):
    # a relative run directory in a working directory that was deleted: "." still stats as a directory,
    # but nothing can be created in it: one line, not a traceback
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(UserError) as err:
        lock.preflight(Path("run"))
    assert str(err.value) == "run: cannot write here (No such file or directory)"


def test_a_lock_file_that_cannot_be_opened_is_one_line(tmp_path):
    run = tmp_path / "run"
    (run / lock.LOCK_FILE).mkdir(parents=True)  # a folder where the lock file should be
    with pytest.raises(UserError) as err:
        lock.acquire(run)
    assert str(err.value) == f"{run}: cannot write here (Is a directory)"
    assert str(run.resolve()) not in lock._held
