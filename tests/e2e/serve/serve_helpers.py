"""Start a real ``tamperbench serve`` subprocess on 127.0.0.1; build client specs for it."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
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


@contextlib.contextmanager
def live_server(backend, **kw):
    import uvicorn

    from tamperbench.serve.app import create_app

    app = create_app(backend, model_name="embedded", **kw)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started and time.time() < deadline:
        time.sleep(0.02)
    try:
        yield sock.getsockname()[1], app.state.batcher
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        app.state.batcher.close()


def send(port: int, path: str, body: dict) -> socket.socket:
    """Send one POST and return the open socket without reading the answer (a client that may leave)."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return s


def post(port: int, path: str, body: dict, timeout: float = 60) -> tuple[int, dict, dict]:
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    con.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = con.getresponse()
    return r.status, dict(r.getheaders()), json.loads(r.read() or b"{}")


def wait_for(cond, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False
