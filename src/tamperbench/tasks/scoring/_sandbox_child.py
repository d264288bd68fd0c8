"""Runs inside the sandbox: set the resource limits, read the nonce, install the guard, run the program file given
as the last argument (``--rlimits=CPU:AS:FSIZE:NOFILE [--no-audit] PROGRAM``), and print the nonce only when
the program ran to its end.

WHY the nonce: the benchmark's tests are the program's last statements, so reaching the end without an
exception means every assertion ran. An exit status of 0 alone does not: ``sys.exit(0)`` or ``os._exit(0)``
before the tests gives it too. The parent sends a fresh random nonce on stdin, and counts a pass only
when stdout ends with it.

WHY the program runs on a thread of its own, started from C: the nonce and the verdict must be out of the
program's reach, or it could print the nonce itself and leave without running the tests. The
main thread keeps the nonce in its own frame; the program's thread is started by ``_thread`` with a chain
of built-in callables only (``list.extend`` over ``exec`` then ``lock.release``), so no Python frame of
this harness is below the program's: ``sys._getframe().f_back`` and tracebacks end at the program's own
module, and the thread's ``run`` holds nothing of ours. The one proof of completion is an item in a list
that only that C chain and this frame can reach, appended when ``exec`` returned. What could still reach
the main thread's frames (``sys._current_frames``, the garbage collector's object lists, ctypes, reading
process memory through ``/proc``, trace and profile functions, another audit hook) is refused by the
audit hook, whose settings live in its closure (immutable), not in globals a traceback could reach; and
``/proc`` is not mounted in the sandbox. While the nonce is alive the main thread runs no code the
program could have replaced: every callable it needs is bound to a local before the program starts, it
raises no audit event, it turns the garbage collector off before it writes the nonce (no finaliser of
the program's runs on it then), and it leaves with ``os._exit`` right after. Any exception reaching it
(``_thread.interrupt_main``) ends the process at once.
The exit status follows ``python program.py``: ``SystemExit``'s code (kept by a ``try`` around the
program's body, after its docstring and ``__future__`` imports), 1 after an uncaught exception.

WHY an audit hook as well as bubblewrap: defence in depth (PEP 578). It refuses network use, starting
processes (including importing ``_posixsubprocess``, whose ``fork_exec`` raises no audit event), signalling
other processes, ctypes, and the introspection above. This file must not import tamperbench: the child
runs with ``python -I -S``.
"""

import _ast
import _thread
import gc
import itertools
import os
import resource
import sys

EXIT_CODES = "__tamperbench_exit_codes__"  # the program's SystemExit codes (its own to read: they prove nothing)


def _make_guard():
    """The audit hook (PEP 578). Its settings are closure constants and its globals a dict of its own, so a
    traceback through it (``tb_frame.f_globals``) reaches nothing that changes what it refuses."""
    blocked = ("socket.", "subprocess.", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
               "os.system", "os.kill", "os.killpg", "pty.", "ctypes.", "webbrowser.", "sys._current_frames",
               "sys._current_exceptions", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace",
               "sys.setprofile", "sys.addaudithook")
    allowed = frozenset({"socket.__new__"})  # creating a socket object is harmless; using it is not
    blocked_imports = frozenset({"_posixsubprocess"})
    fsdecode, text_types, refuse = os.fsdecode, (str, bytes), PermissionError

    def guard(event, args):
        if event.startswith(blocked) and event not in allowed:
            raise refuse(f"sandbox: {event} is not allowed")
        if event == "import" and args[0] in blocked_imports:
            raise refuse(f"sandbox: import {args[0]} is not allowed")
        if event == "open" and isinstance(args[0], text_types) and fsdecode(args[0]).startswith("/proc"):
            raise refuse("sandbox: /proc is not allowed")  # none under bubblewrap; unsandboxed, no memory reads

    return type(guard)(guard.__code__, {"__builtins__": __builtins__}, "guard", None, guard.__closure__)


def _set_limits(spec):
    """Hard and soft limits alike (only a privileged process may raise a hard limit). Set here, not in a
    ``preexec_fn`` of the parent, so the parent can ``vfork()`` (sandbox.py gives the measurement)."""
    cpu, address, fsize, nofile = (int(v) for v in spec.split(":"))
    for which, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, address), (resource.RLIMIT_FSIZE, fsize),
                         (resource.RLIMIT_NOFILE, nofile), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(which, (value, value))


def _at(node, ref):
    node.lineno, node.col_offset = ref.lineno, ref.col_offset
    node.end_lineno, node.end_col_offset = ref.end_lineno, ref.end_col_offset
    return node


def _compile(path):
    """The program as ``python program.py`` would run it, its body in ``try: ... except SystemExit`` so that the
    exit code survives the thread (a thread ends silently on SystemExit). The source is read as bytes so a
    coding line counts; a docstring and ``__future__`` imports stay first. The syntax tree comes from
    ``compile`` and ``_ast`` (built in): the ``ast`` module costs 35 ms to import here, runpy 11 ms."""
    with open(path, "rb") as f:
        tree = compile(f.read(), path, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    body, head = tree.body, 0
    if body and isinstance(body[0], _ast.Expr) and isinstance(body[0].value, _ast.Constant) \
            and isinstance(body[0].value.value, str):
        head = 1
    while head < len(body) and isinstance(body[head], _ast.ImportFrom) and body[head].module == "__future__":
        head += 1
    if head < len(body):
        ref = body[head]
        record = _at(_ast.Expr(value=_at(_ast.Call(
            func=_at(_ast.Attribute(value=_at(_ast.Name(id=EXIT_CODES, ctx=_ast.Load()), ref), attr="append",
                                    ctx=_ast.Load()), ref),
            args=[_at(_ast.Attribute(value=_at(_ast.Name(id="_tb_exit", ctx=_ast.Load()), ref), attr="code",
                                     ctx=_ast.Load()), ref)], keywords=[]), ref)), ref)
        handler = _at(_ast.ExceptHandler(type=_at(_ast.Name(id="SystemExit", ctx=_ast.Load()), ref), name="_tb_exit",
                                         body=[record, _at(_ast.Raise(exc=None, cause=None), ref)]), ref)
        tree.body = body[:head] + [_at(_ast.Try(body=body[head:], handlers=[handler], orelse=[], finalbody=[]), ref)]
    return compile(tree, path, "exec", dont_inherit=True)


def _read_nonce():
    """The parent's nonce from stdin (then at end of file: the program reads nothing from it)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(0, 64)
        if not chunk:
            break
        data += chunk
    return data.strip()


def _run(path, audit):
    """Run the program on its own thread (see the module's docstring); print the nonce only when it returned."""
    code = _compile(path)
    module = type(sys)("__main__")
    codes, errors, returned = [], [], []
    module.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None, __spec__=None)
    module.__dict__[EXIT_CODES] = codes
    done = _thread.allocate_lock()
    done.acquire()
    out, err = sys.stdout, sys.stderr
    write, exit_now, gc_off, failed = os.write, os._exit, gc.disable, BaseException  # bound before the program runs
    nonce = _read_nonce()
    sys.modules["__main__"] = module
    sys.unraisablehook = errors.append  # how _thread reports the program's uncaught exception
    if audit:
        sys.addaudithook(_make_guard())
    try:
        _thread.start_new_thread(returned.extend, (itertools.chain(map(exec, [code], [module.__dict__]),
                                                                   map(_thread.LockType.release, [done])),))
        while not done.acquire(timeout=0.01):
            if errors or codes:
                break
        if returned:  # exec returned: the program, its tests last, ran to its end
            gc_off()
            for stream in (out, err):
                try:
                    stream.flush()
                except failed:
                    pass
            write(1, b"\n" + nonce + b"\n")
            exit_now(0)
    except failed:
        exit_now(70)  # e.g. _thread.interrupt_main(): nothing of the program may run while the nonce is here
    del nonce
    for stream in (out, err):
        try:
            stream.flush()
        except Exception:
            pass
    for e in errors:
        sys.__excepthook__(e.exc_type, e.exc_value, e.exc_traceback)
    if errors:
        return 1
    return codes[0] if codes else 0


def main():
    _set_limits(sys.argv[1].removeprefix("--rlimits="))
    audit = "--no-audit" not in sys.argv[2:-1]  # only tests switch it off, to prove the isolation layer alone holds
    program = sys.argv[-1]
    sys.argv = [program]
    sys.exit(_run(program, audit))


if __name__ == "__main__":
    main()
