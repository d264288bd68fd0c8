"""User-facing errors, and the one place that turns any expected failure into one line.

Anything the user can fix (a bad path, a misspelled spec field, a negative batch size) is
raised as :class:`UserError`. The CLI turns it into one line on stderr and exit status 2,
never a traceback.

WHY :func:`run_cli` also maps some exceptions that are not ``UserError``: an unreadable file, a
read-only directory, a full disk, a non-UTF-8 argument are the user's environment, not a bug, and a
traceback there hides the one fact that matters (which file, what problem). Those become one
``error:`` line naming the file and the problem, exit 2. Anything else is a bug in tamperbench: one
line saying so, exit 1, and the full traceback with ``--debug`` (or ``TAMPERBENCH_DEBUG=1``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn

DEBUG_ENV = "TAMPERBENCH_DEBUG"
DEBUG_FLAG = "--debug"


_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def printable(text: str) -> str:
    """``text`` as one terminal-safe line: whitespace runs become one space, and every other control
    character (C0, DEL, C1 such as ESC or CSI, bidirectional overrides) is written as ``\\xNN`` /
    ``\\uNNNN``. WHY: model names, folder names and spec values reach messages verbatim, and an escape
    sequence in one would clear the screen or print spoofed text in the ``error:`` line."""
    out = []
    for ch in " ".join(text.split()):
        o = ord(ch)
        if o < 0x20 or 0x7F <= o <= 0x9F:
            out.append(f"\\x{o:02x}")
        elif o in _BIDI:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    return "".join(out)


class UserError(Exception):
    """A problem with the user's input; the message names the culprit (field, file, id)."""

    exit_code = 2


def describe_os_error(err: OSError) -> str:
    """``PATH: problem`` for an operating-system error (the path when the error names one)."""
    why = err.strerror or str(err) or type(err).__name__
    names = [n for n in (err.filename, getattr(err, "filename2", None)) if n is not None]
    if names:
        return f"{' -> '.join(os.fsdecode(n) if isinstance(n, bytes) else str(n) for n in names)}: {why}"
    return why


_DAMAGE = ("could not read enough bytes", "corrupt", "checksum", "invalid block")


def damaged_database(err: BaseException, path: object = None) -> str | None:
    """The one-line message for a DuckDB read that failed because the file is cut off or corrupt
    (a truncated copy, a disk that filled): say it is damaged, never "no schema version" or a bug."""
    if not type(err).__module__.lstrip("_").startswith("duckdb"):
        return None
    first = (str(err).splitlines() or [type(err).__name__])[0]
    if type(err).__name__ not in ("IOException", "SerializationException", "InternalException") \
            or not any(m in first.lower() for m in _DAMAGE):
        return None
    where = f"{path}: " if path is not None else ""
    return (f"{where}the run database is damaged (truncated or corrupt: {first}); restore it from a backup "
            "or rerun into a new --out")


def describe(err: BaseException) -> str | None:
    """The one-line message for an expected failure, or None when ``err`` looks like a bug."""
    if isinstance(err, UserError):
        return str(err)
    if isinstance(err, OSError):
        return describe_os_error(err)
    if isinstance(err, UnicodeDecodeError):
        return (f"cannot read text: byte 0x{err.object[err.start]:02x} at position {err.start} is not "
                f"{err.encoding} (save the file as UTF-8)")
    if isinstance(err, UnicodeEncodeError):
        return f"text with a character that {err.encoding} cannot encode ({err.reason}); use UTF-8 text"
    if isinstance(err, RecursionError):
        return "input nested too deeply"
    return damaged_database(err)


def _check_argv(argv: list[str]) -> None:
    """Arguments that are not valid UTF-8 arrive as lone surrogates: refuse them by position."""
    for i, arg in enumerate(argv[1:], 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as err:
            raw = os.fsencode(arg)
            raise UserError(f"argument {i} ({raw[:40]!r}) is not UTF-8 text (byte at position {err.start}); "
                            "pass UTF-8 text") from None


def _debug_requested(argv: list[str]) -> bool:
    """``--debug`` anywhere before a bare ``--`` (removed from argv) or TAMPERBENCH_DEBUG=1."""
    stop = argv.index("--") if "--" in argv else len(argv)
    found = DEBUG_FLAG in argv[1:stop]
    if found:
        argv[:stop] = [a for i, a in enumerate(argv[:stop]) if i == 0 or a != DEBUG_FLAG]
    return found or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def run_cli(app: Callable[[], object]) -> NoReturn:
    """Run the typer app; expected failures are one ``error:`` line (exit 2), bugs one line (exit 1)."""
    debug = _debug_requested(sys.argv)
    try:
        _check_argv(sys.argv)
        app()
    except KeyboardInterrupt:
        print("interrupted: finished batches are stored; rerun the same command to resume", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # e.g. `tamperbench quote score x | head`: the reader left, nothing to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    except SystemExit:
        raise
    except BaseException as err:  # noqa: BLE001 (this is the top level: classify, then report)
        message = describe(err)
        if debug and not isinstance(err, UserError):
            raise
        if message is not None:
            print(f"error: {printable(message)}", file=sys.stderr)
            sys.exit(UserError.exit_code)
        first = printable(str(err))[:300]
        print(f"error: internal error ({type(err).__name__}: {first}); this is a bug in tamperbench: rerun "
              f"with {DEBUG_FLAG} for the traceback and report it", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)
