"""Shared fixtures. The embedded model is real (SmolLM2-135M) and loaded once per session.

TAMPERBENCH_HOME defaults to a cache under the repository's ignored ``.tb_home`` so tests never
touch the user's ~/.cache and the dequantized weights are built once per checkout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("TAMPERBENCH_HOME", str(REPO / ".tb_home"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Cache compiled bytecode even where the environment sets PYTHONDONTWRITEBYTECODE (this machine does).
# WHY: without it every run recompiles the package and pytest re-rewrites the asserts of all ~140 test
# modules: measured 3.7 s of a 9.6 s collection (user CPU, --collect-only, 2 cores). The caches are
# Python's own __pycache__ (git-ignored), checked against each source's mtime and size as usual, and
# nothing else changes: a cold checkout compiles once, as before. Only modules imported after this line.
# The tests' subprocesses (the CLI's smoke tests, the memory bombs under RLIMIT_AS) inherit the same: with
# the variable set, each recompiled every module it imported that no earlier process had (a cold checkout:
# 82.3 s against 56.0 s for three subprocess-heavy files, tests/e2e/cli/test_hostile_files_round3.py,
# tests/integration/owmi/score/test_owmi_dose_paper.py and tests/e2e/tasks/test_bench_score_bounds.py).
# A child under a file-size limit must set PYTHONDONTWRITEBYTECODE=1 itself: Python 3.11 would leave a cut-off
# .pyc there (python/cpython#126606; tests/e2e/cli/test_hostile_inputs_round2.py).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


# Property tests draw the same examples on every run (CI included): a red build must reproduce.
# Explore new examples by hand with TB_HYPOTHESIS_EXPLORE=1 (a failure prints its seed).
try:
    from hypothesis import settings as _hyp_settings

    _hyp_settings.register_profile("tamperbench", derandomize=not os.environ.get("TB_HYPOTHESIS_EXPLORE"))
    _hyp_settings.load_profile("tamperbench")
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    pass


# Loaded models shared by the session: (spec, device, dtype, chat template) -> backend.
_LOADED: dict[tuple, object] = {}
SHARED_SPECS = {"embedded"}  # the spec the suite loads over and over; other specs (tmp dirs) load as usual


def _load_key(spec, device, dtype, chat_template) -> tuple | None:
    if not isinstance(spec, str) or spec.strip() not in SHARED_SPECS or device not in ("auto", "cpu"):
        return None  # anything else (a bad value included) takes the real path, errors and all
    from tamperbench.models.loader import resolve_device

    return (spec.strip(), str(resolve_device(device)), dtype, chat_template)


def _shared_load_hf(real_load_hf):
    """``models.loader.load_hf`` reusing the session's loaded embedded model for the same arguments.

    WHY: an in-process CLI test that runs a model command would otherwise reload the weights (0.5 s
    quiet, seconds loaded) on top of the load the session already paid. Each call gets its own shallow
    copy of the backend (its own attributes; the model and tokenizer shared, as every model test
    shares ``embedded_backend``). Loading itself keeps its subprocess tests (each command's smoke
    test, tests/integration/models/test_embedded_model.py, the cold-cache case)."""
    import copy

    def load_hf(spec="embedded", *, device="auto", dtype=None, batch_size=None, chat_template=None):
        key = _load_key(spec, device, dtype, chat_template)
        if key is None or (batch_size is not None and batch_size < 1):  # a bad value: the real path's error
            return real_load_hf(spec, device=device, dtype=dtype, batch_size=batch_size, chat_template=chat_template)
        if key not in _LOADED:
            _LOADED[key] = real_load_hf(spec, device=device, dtype=dtype, chat_template=chat_template)
        from tamperbench.models.hf import choose_batch_size

        backend = copy.copy(_LOADED[key])
        # as load_hf sizes it (the one argument that only sets an attribute of the backend)
        backend.max_batch_size = choose_batch_size(backend.model, backend.device, cap=batch_size)
        return backend
    return load_hf


@pytest.fixture
def shared_model_loads(monkeypatch):
    """In-process CLI calls (typer's ``CliRunner``) load the embedded model through the session's
    loaded copy (``_shared_load_hf``) instead of reading and packing the weights again (~1.5 s a
    load quiet, most of a ``--dry-run`` test's time). The loader itself keeps its own tests."""
    from tamperbench.models import loader

    monkeypatch.setattr(loader, "load_hf", _shared_load_hf(loader.load_hf))


@pytest.fixture(scope="session")
def embedded_backend():
    from tamperbench.models import load_backend

    key = _load_key("embedded", "cpu", None, None)
    if key not in _LOADED:
        _LOADED[key] = load_backend("embedded", device="cpu")
    return _LOADED[key]


@pytest.fixture(scope="session")
def embedded_tokenizer(embedded_backend):
    return embedded_backend.tokenizer


@pytest.fixture
def bwrap_sandbox():
    """The code sandbox's isolation layer (bubblewrap); the test is skipped, naming why, where it cannot run.
    ``make test`` installs it (the Makefile's sandbox-tools target), as it installs chromium for the browser tests."""
    from tamperbench.tasks.scoring import bwrap

    found = bwrap.probe()
    if isinstance(found, str):
        pytest.skip(found)
    return found


MODEL_FIXTURES = {"embedded_backend", "embedded_tokenizer"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A test that takes the model fixture loads the model: it carries ``model`` even if its author
    forgot the mark, so ``-m "not model"`` (the fast suite) never loads it. (A test that loads the
    model another way, e.g. through a CLI subprocess, still needs the mark by hand.)"""
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("model") is None:
            item.add_marker(pytest.mark.model)


def _one_thread_per_process() -> None:
    """The fast suite (no ``model`` test selected) runs numpy/scipy/torch on one thread.

    WHY: its torch tests use tiny random models (32-wide layers) where intra-op parallelism buys
    nothing, and on a shared 2-core machine an OpenMP pool of 2 spin-waits whenever the other core
    is busy: measured under load 5, tests/integration/models/test_architecture_parity.py's decoder
    cases took 17.5 s with 2 threads and 8.5 s with 1. The model tests keep the default pool.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # for a torch imported later in this process
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)  # BLAS and OpenMP pools already loaded (numpy, scipy, torch)
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _fewer_full_collections() -> None:
    """The fast suite keeps what collection imported out of the garbage collector's full passes.

    WHY: collection imports torch, transformers, scikit-learn and the rest, ~400k objects that live
    until the process exits, and every full (generation 2) collection walks all of them: measured in
    the fast suite (1680 tests, load 5), 12 automatic full passes, 4.4 s of CPU. ``gc.freeze()`` moves
    the survivors of collection to the permanent generation (never walked, never freed: they were
    module-level anyway), and a generation-2 threshold of 100 instead of 10 lets a full pass come
    after 100 generation-1 passes instead of 10: 2.1 s in the same run. Young garbage (generations 0
    and 1, the cycles a test makes) is collected as before; nothing a test asserts depends on when a
    full pass runs. The model tests (``make test``) keep Python's defaults.
    """
    import gc

    gc.collect()
    gc.freeze()
    gen0, gen1, _ = gc.get_threshold()
    gc.set_threshold(gen0, gen1, 100)


def pytest_collection_finish(session):
    if not any(item.get_closest_marker("model") for item in session.items):
        _one_thread_per_process()
        _fewer_full_collections()
    elif _xdist_workers() >= (os.cpu_count() or 1):
        _one_thread_per_process()  # the workers are the parallelism: one OpenMP pool each would oversubscribe
    _build_model_cache(session)


def _xdist_workers() -> int:
    """How many pytest-xdist workers this run has (0 without xdist)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)


def _build_model_cache(session):
    """Build the embedded model's dequantized cache once, before any test runs, when a selected test
    needs the model. WHY: the first load prints a "dequantizing ..." line and takes ~30 s; left to
    whichever test loads first, that line lands in one test's stderr and its one-line-error check
    depends on test order (CI failed that way). A cold cache is tested on purpose, in its own
    TAMPERBENCH_HOME (tests/e2e/cli/test_hostile_inputs.py)."""
    if any(item.get_closest_marker("model") for item in session.items):
        import fcntl

        from tamperbench.models.sources import resolve, tamperbench_home

        home = tamperbench_home()
        home.mkdir(parents=True, exist_ok=True)
        # pytest-xdist workers each get here: one builds a cold cache, the others wait, then find it built
        # (two builds at once would each replace the other's folder under a loading worker)
        with open(home / ".tests-build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            resolve("embedded")


_CLICK_COMMANDS: dict = {}


def _app_shape(app) -> tuple:
    """What typer builds the click command from: the app, its commands and its sub-apps, recursively."""
    return (id(app), id(app.registered_callback), tuple(id(c) for c in app.registered_commands),
            tuple((id(g), _app_shape(g.typer_instance)) for g in app.registered_groups))


def _click_command_once(real_get_command):
    """``typer.main.get_command``, memoised on the app's shape for in-process CLI calls.

    WHY: typer rebuilds the whole click command tree (every command's signature) on each call, 22 ms
    here, ~70 times in the fast suite; a console script builds it once per process. Click commands are
    made to be invoked repeatedly (each call gets a fresh context), and an app whose commands or
    sub-apps change gets a new shape, hence a fresh build."""
    def get_command(app):
        key = _app_shape(app)
        if key not in _CLICK_COMMANDS:
            _CLICK_COMMANDS[key] = real_get_command(app)
        return _CLICK_COMMANDS[key]
    return get_command


@pytest.fixture
def tb_inprocess(monkeypatch):
    """``tb_inprocess(*args, cwd=None, env=None)`` runs ``tamperbench ARGS`` through the console entry
    point itself (``tamperbench.cli.main``: argv check, typer, the error classifier, ``sys.exit``) in
    this process and returns a CompletedProcess with its exit status, stdout and stderr.

    WHY: a subprocess costs an interpreter start and the imports (~0.5 s each, seconds on a loaded
    2-core machine) and proves nothing more for a test about a message or an exit status; the real
    ``python -m tamperbench.cli`` route keeps its own subprocess tests (tests/e2e/cli/
    test_cli_errors.py, the non-UTF-8 argv and cold-cache cases of test_hostile_inputs.py). What a
    subprocess would show on stderr still shows here: Python's default warning filters are restored
    and pytest's log capture is lifted for the call, so a stray warning or log line fails a
    one-line check as it would at the command line.
    """
    import contextlib
    import io
    import logging
    import subprocess
    import warnings

    def _warning_to_stderr(msg: warnings.WarningMessage) -> None:
        sys.stderr.write(warnings.formatwarning(msg.message, msg.category, msg.filename, msg.lineno, msg.line))

    def run(*args, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        import typer.main

        from tamperbench.cli import main
        from tamperbench.models import loader

        argv = ["tamperbench", *(os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args)]
        out, err = io.StringIO(), io.StringIO()
        code: int = 0
        with monkeypatch.context() as m:
            m.setattr(sys, "argv", argv)
            m.setattr(typer.main, "get_command", _click_command_once(typer.main.get_command))
            m.setattr(loader, "load_hf", _shared_load_hf(loader.load_hf))  # the session's loaded model
            m.setenv("HF_HUB_OFFLINE", "1")
            m.delenv("TAMPERBENCH_DEBUG", raising=False)
            for k, v in (env or {}).items():
                m.setenv(k, v)
            if (env or {}).get("COLUMNS", "").isdigit():
                # a subprocess's consoles read COLUMNS when they are made; a module-level rich Console made
                # earlier in this process (another test, another xdist file) kept the width it had then
                import rich.console

                cols = int(env["COLUMNS"])  # type: ignore[index]
                size = rich.console.Console.size  # rendering reads .size (width and height), .width reads .size
                m.setattr(rich.console.Console, "size", property(
                    lambda self: rich.console.ConsoleDimensions(cols, size.fget(self).height), size.fset))
            if cwd is not None:
                m.chdir(cwd)
            m.setattr(logging.root, "handlers", [])  # unhandled log records reach stderr (logging.lastResort)
            m.setattr(warnings, "_showwarnmsg_impl", _warning_to_stderr)  # pytest records them otherwise
            with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                warnings.resetwarnings()  # the interpreter's defaults, not pytest's
                for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                    warnings.simplefilter("ignore", category)
                warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
                try:
                    main()
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())

    return run
