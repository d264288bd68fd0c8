"""Runs inside the sandbox child: set the resource limits, install the guard, then run the program file
given as the last argument (``--rlimits=CPU:AS:FSIZE:NOFILE [--no-audit] PROGRAM``).

WHY an audit hook: it is the one guard that untrusted code in the same interpreter cannot
remove (PEP 578). It refuses network use (socket connect/bind/sendto/getaddrinfo), starting
processes and signalling other processes. When the parent could also put the child in its own
network namespace (``unshare -n``, root only), the audit hook is a second wall, not the only one.
This file must not import tamperbench: the child runs with ``python -I``.
"""

import resource
import sys

_BLOCKED_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                     "os.system", "os.kill", "os.killpg", "pty.", "ctypes.dlopen", "webbrowser.")
_ALLOWED = {"socket.__new__"}  # creating a socket object is harmless; using it is not


def _guard(event, args):
    if event.startswith(_BLOCKED_PREFIXES) and event not in _ALLOWED:
        raise PermissionError(f"sandbox: {event} is not allowed")


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


def main():
    _set_limits(sys.argv[1].removeprefix("--rlimits="))
    audit = "--no-audit" not in sys.argv[2:-1]  # only tests switch it off, to prove the netns alone blocks
    program = sys.argv[-1]
    sys.argv = [program]
    if audit:
        sys.addaudithook(_guard)
    _run_as_main(program)


if __name__ == "__main__":
    main()
