"""Runs inside the sandbox child: install the guard, then run the program file given as argv[1].

WHY an audit hook: it is the one guard that untrusted code in the same interpreter cannot
remove (PEP 578). It refuses network use (socket connect/bind/sendto/getaddrinfo), starting
processes and signalling other processes. When the parent could also put the child in its own
network namespace (``unshare -n``, root only), the audit hook is a second wall, not the only one.
This file must not import tamperbench: the child runs with ``python -I``.
"""

import runpy
import sys

_BLOCKED_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                     "os.system", "os.kill", "os.killpg", "pty.", "ctypes.dlopen", "webbrowser.")
_ALLOWED = {"socket.__new__"}  # creating a socket object is harmless; using it is not


def _guard(event, args):
    if event.startswith(_BLOCKED_PREFIXES) and event not in _ALLOWED:
        raise PermissionError(f"sandbox: {event} is not allowed")


def main():
    audit = sys.argv[1] != "--no-audit"  # only tests switch it off, to prove the netns alone blocks
    program = sys.argv[-1]
    sys.argv = [program]
    if audit:
        sys.addaudithook(_guard)
    runpy.run_path(program, run_name="__main__")


if __name__ == "__main__":
    main()
