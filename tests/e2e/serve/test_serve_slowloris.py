"""Issue 35, Medium 7 (slowloris), against a real ``tamperbench serve`` subprocess on 127.0.0.1 with real
sockets: connections that send part of a header are closed at the read deadline, connections past the cap
are closed when accepted, an idle keep-alive connection is closed, and the server answers afterwards.
The limits are set low here (20 connections, 2 s) so that the test is short; the defaults are 256 and 10 s.
"""

from __future__ import annotations

import http.client
import socket
import time

import pytest
from serve_helpers import Server

pytestmark = pytest.mark.model  # the server loads the embedded model

PARTIAL = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "  # never finished


def _closed_within(s: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed ``s`` (end of file or reset), or None if it stayed open."""
    start = time.monotonic()
    s.settimeout(seconds)
    try:
        while s.recv(4096):
            pass
    except (ConnectionResetError, BrokenPipeError):
        pass
    except TimeoutError:
        return None
    return time.monotonic() - start


def _models(port: int) -> int:
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    con.request("GET", "/v1/models")
    return con.getresponse().status


@pytest.fixture(scope="module")
def guarded():
    s = Server("--max-connections", "20", "--read-timeout", "2", "--keep-alive-timeout", "1")
    port = int(s.url.rsplit(":", 1)[1].split("/")[0])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # "serving" is printed just before uvicorn listens
        try:
            _models(port)
            break
        except OSError:
            time.sleep(0.2)
    yield port
    s.stop()


def test_partial_headers_are_closed_at_the_read_deadline_and_extra_connections_at_once(guarded):
    port = guarded
    slow = []
    for _ in range(15):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(PARTIAL)
        slow.append(s)
    assert _models(port) == 200  # under the cap, the server still answers while they dangle
    slow += [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]  # the cap: 20
    time.sleep(0.3)
    extra = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
    for s in extra:
        took = _closed_within(s, 1.5)
        assert took is not None, "a connection past the cap stayed open"
    t0 = time.monotonic()
    for s in slow:
        assert _closed_within(s, max(0.1, 6 - (time.monotonic() - t0))) is not None, "a slow client stayed open"
    assert time.monotonic() - t0 < 6
    assert _models(port) == 200  # and the server answers again


def test_an_idle_keep_alive_connection_is_closed(guarded):
    port = guarded
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    s.settimeout(5)
    assert s.recv(65536).startswith(b"HTTP/1.1 200")
    took = _closed_within(s, 4)
    assert took is not None and took < 3, took


def test_a_body_sent_too_slowly_is_cut_and_a_whole_request_is_not(guarded):
    port = guarded
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    assert _closed_within(s, 5) is not None
    assert _models(port) == 200
