"""A server that dies in the middle of a run: the client retries, then stops with one clear line, and
rerunning the same command resumes without losing or duplicating finished trials.

The real ``tamperbench serve`` answers; in front of it sits a small forwarding proxy on a fixed port
that stops listening after a set number of requests (the "killed server", deterministic) and is
started again on the same port for the rerun, so the run's model spec, and so its keys, stay the same.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tamperbench.store import RunStore

pytestmark = pytest.mark.model
ITEMS = "S01,S02,S03,S04"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """Forwards POSTs to ``target``; after ``limit`` answered requests it closes its socket for good."""

    def __init__(self, port: int, target: str, limit: int | None):
        proxy = self
        self.count = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                req = urllib.request.Request(target + self.path.removeprefix("/v1"), data=body, method="POST",
                                             headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
                with urllib.request.urlopen(req, timeout=600) as r:
                    data, status = r.read(), r.status
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                proxy.count += 1
                if limit is not None and proxy.count >= limit:
                    threading.Thread(target=proxy.stop, daemon=True).start()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def quote_run(tb_inprocess, port: int, out) -> subprocess.CompletedProcess:
    """``quote run`` against the proxy through the CLI's entry point, in-process (``tb_inprocess``,
    tests/conftest.py); the real server is a subprocess, ``quote run``'s own smoke test is
    tests/e2e/quote/test_quote_cli_e2e.py."""
    spec = f"openai:http://127.0.0.1:{port}/v1#embedded?retries=1&timeout=60&concurrency=1&key_env=TB_SERVE_TEST_KEY"
    return tb_inprocess("quote", "run", "--model", spec, "--arm", "plain", "--items", ITEMS, "--max-new-tokens", "6",
                        "--batch-size", "1", "--out", str(out))


def test_killed_server_fails_clearly_and_the_rerun_resumes(server, tmp_path, tb_inprocess):
    port = free_port()
    _proxy = Proxy(port, server.url, limit=2)  # held for the test: it serves until collected
    first = quote_run(tb_inprocess, port, tmp_path / "run")
    assert first.returncode == 2, first.stderr
    err = [line for line in first.stderr.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "cannot reach" in err[0] and "after 1 retries" in err[0], first.stderr
    assert "Traceback" not in first.stderr
    with RunStore.open_existing(tmp_path / "run", read_only=True) as store:
        kept = {r["key"] for r in store.rows("quote_trials")}
    assert 1 <= len(kept) <= 2  # what was answered before the server died is stored

    Proxy(port, server.url, limit=None)
    again = quote_run(tb_inprocess, port, tmp_path / "run")
    assert again.returncode == 0, again.stderr
    with RunStore.open_existing(tmp_path / "run", read_only=True) as store:
        rows = store.rows("quote_trials")
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)) == 4  # nothing lost, nothing duplicated
    assert kept <= set(keys)
