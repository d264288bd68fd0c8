"""The writer lock of a run directory (``RUN/.lock``), and moving a superseded run aside.

WHY a lock file beside DuckDB's own lock: DuckDB locks ``records.duckdb`` only while a connection
is open, so a ``--new`` that deleted the database before opening anything could delete a run that
another process is still writing, and its records would be lost without a word.
Every writer holds an exclusive ``flock`` on ``RUN/.lock`` for as long as its store is open;
``--new`` takes that lock first and, holding it, *moves* the old run into
``RUN/.superseded/<UTC time>/`` instead of deleting it. A second writer gets one line naming the
pid that holds the run.

The lock is per process and re-entrant within it (a process may open the same run twice, as
DuckDB itself allows), and the kernel releases it when the holder dies, even by SIGKILL.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from pathlib import Path

from tamperbench.errors import UserError
from tamperbench.safeio.files import open_lock, refuse_links

try:  # POSIX; on other systems runs are not locked (DuckDB still refuses a second writer)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".lock"
SUPERSEDED_DIR = ".superseded"

_held: dict[str, tuple[int, int]] = {}  # resolved run dir -> (fd, open count) in this process
_guard = threading.Lock()


def _describe(err: OSError, path: Path) -> str:
    return f"{path}: cannot write here ({err.strerror or err})"


def _held_elsewhere(fd: int, run_dir: Path) -> UserError:
    """The refusal when another process holds the lock open as ``fd``: it names the holder's pid,
    which the holder wrote into the lock file."""
    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
    return UserError(f"{run_dir}: another process (pid {holder}) is writing this run; "
                     "wait for it to finish or use another --out")


def acquire(run_dir: Path) -> str:
    """Take the exclusive writer lock of ``run_dir`` (created if missing); returns the handle key."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(_describe(err, run_dir)) from None
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: exists and is not a directory")
    key = str(run_dir.resolve())
    with _guard:
        if key in _held:
            fd, n = _held[key]
            _held[key] = (fd, n + 1)
            return key
        path = run_dir / LOCK_FILE
        try:
            fd = open_lock(path)  # O_NOFOLLOW: a .lock that is a link is refused, its target untouched
        except OSError as err:
            raise UserError(_describe(err, run_dir)) from None
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                refusal = _held_elsewhere(fd, run_dir)
                os.close(fd)
                raise refusal from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[key] = (fd, 1)
        return key


def release(key: str) -> None:
    with _guard:
        if key not in _held:
            return
        fd, n = _held[key]
        if n > 1:
            _held[key] = (fd, n - 1)
            return
        del _held[key]
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)  # closing the descriptor releases the flock


def move_aside(run_dir: Path, names: tuple[str, ...]) -> Path | None:
    """Move the files ``names`` of a superseded run into ``RUN/.superseded/<UTC time>/``.

    Call only while holding the lock. Returns the folder, or None when there was nothing to move.
    """
    present = [n for n in names if (run_dir / n).exists()]
    if not present:
        return None
    refuse_links(run_dir, (SUPERSEDED_DIR,))
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    target = run_dir / SUPERSEDED_DIR / stamp
    try:
        target.mkdir(parents=True)
        for n in present:
            os.replace(run_dir / n, target / n)
    except OSError as err:
        raise UserError(_describe(err, run_dir)) from None
    return target


def preflight(run_dir: Path) -> None:
    """Fail now, creating nothing, if ``run_dir`` could not be written or is held by another writer.

    WHY: runners load a model (seconds to minutes) before they open the store; a run directory
    that cannot be written must be one line *before* that cost, not after it. The check is real,
    not ``os.access`` (which says yes to root on sysfs): it creates and removes a temporary file in
    the run directory, or in its nearest existing ancestor when the run directory is new.
    """
    import tempfile

    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"{run_dir}: exists and is not a directory")
    probe_in = run_dir
    while not probe_in.exists():
        if probe_in.parent == probe_in:
            break
        probe_in = probe_in.parent
    if not probe_in.is_dir():
        raise UserError(f"{run_dir}: cannot write here ({probe_in} is not a directory)")
    try:
        fd, name = tempfile.mkstemp(prefix=".tb-preflight-", dir=probe_in)
    except OSError as err:
        raise UserError(_describe(err, run_dir)) from None
    os.close(fd)
    os.unlink(name)
    lock_path = run_dir / LOCK_FILE
    refuse_links(run_dir, (LOCK_FILE,))
    if fcntl is None or not lock_path.exists() or str(run_dir.resolve()) in _held:
        return
    fd = os.open(lock_path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise _held_elsewhere(fd, run_dir) from None
    finally:
        os.close(fd)  # releases the probe lock, if it was taken
