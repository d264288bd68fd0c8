"""Writing files safely in places a user (or an attacker) prepared: run directories, report folders.

WHY one helper for every file tamperbench writes: a run directory is input. If ``quote_table.json``
in it is a symbolic link to another file, ``open(path, "w")`` follows the link and overwrites the
target; if the disk fills mid-write, the file is left cut off. :func:`atomic_write` writes a temporary
file in the same folder (created with ``O_EXCL``, so it never follows a link), flushes it to disk and
renames it over the destination with :func:`os.replace`, which replaces a directory entry and never
writes through one. A destination that is a symbolic link is refused in one line, as is any file of a
run directory a writer would touch (:func:`refuse_links`). Readers of the file see the old content or
the new, never half of it, and a failed write names the destination, not the temporary file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from tamperbench.errors import UserError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()  # what open(path, "w") would have created


def link_refusal(path: Path) -> UserError:
    return UserError(f"{path}: is a symbolic link; tamperbench does not write through links "
                     "(replace it with a regular file or use another folder)")


def refuse_links(folder: Path, names: Iterable[str]) -> None:
    """Refuse, in one line, when any of ``names`` inside ``folder`` is a symbolic link."""
    for name in names:
        if (Path(folder) / name).is_symlink():
            raise link_refusal(Path(folder) / name)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def cannot_write(path: Path, err: OSError) -> UserError:
    return UserError(f"{path}: cannot write ({err.strerror or err})")


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", *, encoding: str | None = "utf-8",
                newline: str | None = None) -> Iterator[IO[Any]]:
    """``with atomic_open(p) as fh:`` writes ``fh`` to a temporary file beside ``p`` and renames it
    over ``p`` when the block ends without an error; on any error ``p`` is untouched and the
    temporary file removed. ``mode`` is ``"w"`` or ``"wb"``. A symbolic link at ``p`` is refused."""
    path = Path(path)
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode {mode!r}")
    if path.is_symlink():
        raise link_refusal(path)
    if path.is_dir():
        raise UserError(f"{path}: cannot write (Is a directory)")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:80]}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise cannot_write(path, err) from None
    try:
        os.fchmod(fd, _MODE)
        fh = os.fdopen(fd, mode, encoding=None if "b" in mode else encoding, newline=None if "b" in mode else newline)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    try:
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise cannot_write(path, err) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write(path: str | Path, data: str | bytes, *, encoding: str = "utf-8") -> Path:
    """Write ``data`` (text as ``encoding``, or bytes) to ``path`` atomically; returns ``path``."""
    path = Path(path)
    with atomic_open(path, "wb") as fh:
        fh.write(data.encode(encoding) if isinstance(data, str) else data)
    return path


def open_lock(path: Path) -> int:
    """Open (creating) a lock file for reading and writing without following a symbolic link."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP or path.is_symlink():
            raise link_refusal(path) from None
        raise


def check_size(path: Path, limit: int, what: str = "file") -> None:
    """Refuse, before reading it, a file over ``limit`` bytes (an input that cannot be what it claims)."""
    try:
        st = Path(path).stat()
    except OSError:
        return  # the reader reports a missing or unreadable file in its own words
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the reader, a device never end
        raise UserError(f"{path}: {what} is {_kind(st.st_mode)}; tamperbench reads regular files only")
    size = st.st_size
    if size > limit:
        unit, div = ("MiB", 1 << 20) if limit >= 1 << 20 else ("KiB", 1 << 10)
        raise UserError(f"{path}: {what} over {limit // div} {unit} ({size} bytes); refusing to read it")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def regular_file(path: str | Path, what: str = "file") -> Path:
    """Refuse, without opening it, anything at ``path`` but a regular file (after following links).

    WHY: opening a FIFO for reading blocks until a writer comes, and ``/dev/zero`` never ends; an input
    named on the command line or found in a folder must be a plain file before tamperbench reads it."""
    path = Path(path)
    st = path.stat()  # a missing file: the OSError names it (errors.describe_os_error)
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: {what} is {_kind(st.st_mode)}; tamperbench reads regular files only")
    return path


def read_capped(path: str | Path, limit: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, reading no more than ``limit + 1``.

    The file is opened non-blocking (a FIFO does not wait for a writer) and checked with ``fstat`` on
    the open descriptor, so a file swapped between a check and the read is still checked; a file that
    grows past ``limit`` while being read (or lies about its size) is refused after ``limit + 1`` bytes."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):  # as open() would say it, so readers keep their own wording
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{path}: {what} is {_kind(st.st_mode)}; tamperbench reads regular files only")
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    finally:
        os.close(fd)
    if got > limit:
        raise UserError(f"{path}: {what} over {_human(limit)} (at least {got} bytes); refusing to read it")
    return b"".join(chunks)


def _human(limit: int) -> str:
    unit, div = ("MiB", 1 << 20) if limit >= 1 << 20 else ("KiB", 1 << 10)
    return f"{limit // div} {unit}" if limit >= 1 << 10 else f"{limit} bytes"


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """``with atomic_path(p, ".eval") as tmp:`` for a library that writes a file by name itself: ``tmp``
    lies in a fresh private folder beside ``p`` (``mkdtemp``: a random name, mode 0700, so nothing can be
    planted there), and is renamed over ``p`` when the block ends without an error. A link at ``p`` is
    refused; on any error ``p`` is untouched and the folder removed."""
    import shutil

    path = Path(path)
    if path.is_symlink():
        raise link_refusal(path)
    if path.is_dir():
        raise UserError(f"{path}: cannot write (Is a directory)")
    try:
        folder = Path(tempfile.mkdtemp(prefix=f".{path.name[:80]}.", suffix=".partial", dir=path.parent))
    except OSError as err:
        raise cannot_write(path, err) from None
    try:
        tmp = folder / f"partial{suffix}"
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        raise cannot_write(path, err) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _fsync_dir(path.parent)
