"""Runs inside the sandbox: set the resource limits, read the nonce, install the guard, run the program file given
as the last argument (``--rlimits=CPU:AS:FSIZE:NOFILE [--no-audit] PROGRAM``), and print the nonce only when
the program ran to its end.

WHY the nonce: the benchmark's tests are the program's last statements, so reaching the end without an
exception means every assertion ran. An exit status of 0 alone does not: ``sys.exit(0)`` or ``os._exit(0)``
before the tests gives it too. The parent sends a fresh random nonce on stdin, and counts a pass only
when stdout ends with it.

WHY the program runs on a thread of its own, started from C: the nonce and the verdict must be out of the
program's reach, or it could print the nonce itself and leave without running the tests (issue 35). The
main thread keeps the nonce in its own frame; the program's thread is started by ``_thread`` with a chain
of built-in callables only (``list.extend`` over ``exec`` then ``lock.release``), so no Python frame of
this harness is below the program's: ``sys._getframe().f_back`` and tracebacks end at the program's own
module, and the thread's ``run`` holds nothing of ours. The one proof of completion is an item in a list
that only that C chain and this frame can reach, appended when ``exec`` returned. What could still reach
the main thread's frames (``sys._current_frames``, the garbage collector's object lists, ctypes, reading
process memory through ``/proc``) is refused by the audit hook, and ``/proc`` is not mounted in the sandbox.
The exit status follows ``python program.py``: ``SystemExit``'s code (kept by a ``try`` around the
program's body, after its docstring and ``__future__`` imports), 1 after an uncaught exception.

WHY an audit hook as well as bubblewrap: defence in depth (PEP 578). It refuses network use, starting
processes (including importing ``_posixsubprocess``, whose ``fork_exec`` raises no audit event), signalling
other processes, ctypes, and the introspection above. This file must not import tamperbench: the child
runs with ``python -I -S``.
"""

import _thread
import itertools
import os
import resource
import sys
import threading

_BLOCKED_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                     "os.system", "os.kill", "os.killpg", "pty.", "ctypes.", "webbrowser.", "sys._current_frames",
                     "sys._current_exceptions", "gc.get_objects", "gc.get_referrers", "gc.get_referents")
EXIT_CODES = "__tamperbench_exit_codes__"  # the program's SystemExit codes (its own to read: they prove nothing)
_ALLOWED = {"socket.__new__"}  # creating a socket object is harmless; using it is not
_BLOCKED_IMPORTS = {"_posixsubprocess"}


def _guard(event, args):
    if event.startswith(_BLOCKED_PREFIXES) and event not in _ALLOWED:
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "import" and args[0] in _BLOCKED_IMPORTS:
        raise PermissionError(f"sandbox: import {args[0]} is not allowed")
    if event == "open" and isinstance(args[0], (str, bytes)) and os.fsdecode(args[0]).startswith("/proc"):
        raise PermissionError("sandbox: /proc is not allowed")  # no /proc under bubblewrap; unsandboxed, no memory reads


def _set_limits(spec):
    """Hard and soft limits alike (only a privileged process may raise a hard limit). Set here, not in a
    ``preexec_fn`` of the parent, so the parent can ``vfork()`` (sandbox.py gives the measurement)."""
    cpu, address, fsize, nofile = (int(v) for v in spec.split(":"))
    for which, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, address), (resource.RLIMIT_FSIZE, fsize),
                         (resource.RLIMIT_NOFILE, nofile), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(which, (value, value))


def _compile(path):
    """The program as ``python program.py`` would run it, its body in ``try: ... except SystemExit`` so that the
    exit code survives the thread (a thread ends silently on SystemExit). The source is read as bytes so a
    coding line counts; a docstring and ``__future__`` imports stay first. ``ast`` rather than ``runpy``:
    runpy imports pkgutil and typing, 11 ms of the ~28 ms a sandboxed program costs here."""
    import ast

    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    body, head = tree.body, 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        head = 1
    while head < len(body) and isinstance(body[head], ast.ImportFrom) and body[head].module == "__future__":
        head += 1
    if head < len(body):
        guard = ast.parse(f"try:\n    pass\nexcept SystemExit as _tb_exit:\n    {EXIT_CODES}.append(_tb_exit.code)\n"
                          "    raise\n").body[0]
        guard.body = body[head:]  # type: ignore[attr-defined]
        ast.copy_location(guard, body[head])
        tree.body = body[:head] + [guard]
        ast.fix_missing_locations(tree)
    return compile(tree, path, "exec", dont_inherit=True)


def _run(path, nonce):
    """Run the program on its own thread (see the module's docstring); print the nonce only when it returned."""
    code = _compile(path)
    module = type(sys)("__main__")
    codes, errors, returned = [], [], []
    module.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None, __spec__=None)
    module.__dict__[EXIT_CODES] = codes
    sys.modules["__main__"] = module
    sys.unraisablehook = errors.append  # how _thread reports the program's uncaught exception
    done = _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(returned.extend, (itertools.chain(map(exec, [code], [module.__dict__]),
                                                               map(_thread.LockType.release, [done])),))
    while not done.acquire(timeout=0.01):
        if errors or codes:
            break
    if returned:  # exec returned: the program, its tests last, ran to its end
        for t in threading.enumerate():  # what `python program.py` waits for before it exits
            if t is not threading.main_thread() and not t.daemon and not isinstance(t, threading._DummyThread):
                t.join()
        _flush()
        os.write(1, b"\n" + nonce + b"\n")
        return 0
    _flush()
    for err in errors:
        sys.__excepthook__(err.exc_type, err.exc_value, err.exc_traceback)
    if errors:
        return 1
    return codes[0] if codes else 0


def _flush():
    try:
        sys.stdout.flush()
    except Exception:  # the program may have replaced or closed sys.stdout
        pass


def _read_nonce():
    """The parent's nonce from stdin (then at end of file: the program reads nothing from it)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(0, 64)
        if not chunk:
            break
        data += chunk
    return data.strip()


def main():
    _set_limits(sys.argv[1].removeprefix("--rlimits="))
    nonce = _read_nonce()
    audit = "--no-audit" not in sys.argv[2:-1]  # only tests switch it off, to prove the isolation layer alone holds
    program = sys.argv[-1]
    sys.argv = [program]
    if audit:
        sys.addaudithook(_guard)
    sys.exit(_run(program, nonce))


if __name__ == "__main__":
    main()
