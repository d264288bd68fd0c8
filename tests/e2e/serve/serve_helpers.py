"""Start a real ``tamperbench serve`` subprocess on 127.0.0.1; build client specs for it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path



class Server:
    def __init__(self, *args: str, env: dict | None = None):
        self.proc = subprocess.Popen([sys.executable, "-m", "tamperbench.cli", "serve", "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})
        deadline = time.time() + 240
        line = ""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("serving "):
                break
            if not line and self.proc.poll() is not None:
                raise AssertionError(f"serve did not start: {self.proc.stderr.read()}")
        self.url = line.split(" at ", 1)[1].split(" ", 1)[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def spec_for(url: str, **opts: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"tokenizer": "embedded", "key_env": "TB_SERVE_TEST_KEY", **opts}.items())
    return f"openai:{url}#embedded?{query}"


REPO = Path(__file__).resolve().parents[3]
