"""Runs inside the sandbox: set the resource limits, read the nonce, install the guard, run the program file given
as the last argument (``--rlimits=CPU:AS:FSIZE:NOFILE [--no-audit] PROGRAM``), and print the nonce only when
the program ran to its end.

WHY the nonce: the benchmark's tests are the program's last statements, so reaching the end without an
exception means every assertion ran. An exit status of 0 alone does not: ``sys.exit(0)`` or ``os._exit(0)``
before the tests gives it too. The parent sends a fresh random nonce on stdin, and counts a pass only
when stdout ends with it. (A program written to read this script's memory could find it; the nonce is a
check that the harness finished, and the isolation layer, not the nonce, is what contains such a program.)

WHY an audit hook as well as bubblewrap: defence in depth (PEP 578). It refuses network use, starting
processes (including importing ``_posixsubprocess``, whose ``fork_exec`` raises no audit event) and
signalling other processes. This file must not import tamperbench: the child runs with ``python -I -S``.
"""

import os
import resource
import sys

_BLOCKED_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                     "os.system", "os.kill", "os.killpg", "pty.", "ctypes.dlopen", "webbrowser.")
_ALLOWED = {"socket.__new__"}  # creating a socket object is harmless; using it is not
_BLOCKED_IMPORTS = {"_posixsubprocess"}


def _guard(event, args):
    if event.startswith(_BLOCKED_PREFIXES) and event not in _ALLOWED:
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "import" and args[0] in _BLOCKED_IMPORTS:
        raise PermissionError(f"sandbox: import {args[0]} is not allowed")


def _set_limits(spec):
    """Hard and soft limits alike (only a privileged process may raise a hard limit). Set here, not in a
    ``preexec_fn`` of the parent, so the parent can ``vfork()`` (sandbox.py gives the measurement)."""
    cpu, address, fsize, nofile = (int(v) for v in spec.split(":"))
    for which, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, address), (resource.RLIMIT_FSIZE, fsize),
                         (resource.RLIMIT_NOFILE, nofile), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(which, (value, value))


def _run_as_main(path):
    """Run the file as ``__main__``: what ``runpy.run_path`` does for a plain ``.py`` file (the source read as
    bytes so a coding line counts, a fresh module in ``sys.modules["__main__"]``), without importing runpy.
    WHY: runpy imports pkgutil and typing, 11 ms of the ~28 ms a sandboxed program costs here."""
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    module = type(sys)("__main__")
    module.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None, __spec__=None)
    sys.modules["__main__"] = module
    exec(code, module.__dict__)


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
    _run_as_main(program)
    try:
        sys.stdout.flush()
    except Exception:  # the program may have replaced or closed sys.stdout; the nonce goes to fd 1 directly
        pass
    os.write(1, b"\n" + nonce + b"\n")


if __name__ == "__main__":
    main()
