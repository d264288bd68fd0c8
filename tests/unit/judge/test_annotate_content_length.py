"""Issue 15.5: the annotation server's 64 KiB body cap holds for every Content-Length, over raw sockets.

Raw sockets because an HTTP library would refuse to send these headers. ``Content-Length: -1``
once slipped past the cap (``rfile.read(-1)`` read 300 MiB); ``abc`` printed a server traceback.
"""

from __future__ import annotations

import json
import socket

import pytest

from tamperbench.judge.annotate import MAX_BODY, AnnotationServer, prepare
from tamperbench.judge.prompt import LABELS
from tamperbench.judge.samples import sample_rows, write_fixture_run


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module: every request below but the last test's is refused, so none changes its state."""
    run = write_fixture_run(tmp_path_factory.mktemp("annotate") / "run", sample_rows())
    app = prepare(run, 2, seed=1, annotator="ann")
    srv = AnnotationServer(app, port=0)
    srv.start()
    yield srv
    srv.stop()
    app.store.close()


def raw_post(srv, lengths: list[str], body: bytes = b"", send_after: bytes = b"") -> tuple[int, dict]:
    head = ["POST /api/label HTTP/1.1", f"Host: 127.0.0.1:{srv.port}", f"X-Annotate-Token: {srv.app.token}",
            "Content-Type: application/json", *(f"Content-Length: {v}" for v in lengths), "", ""]
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall("\r\n".join(head).encode("utf-8") + body)
        if send_after:
            try:
                sock.sendall(send_after)
            except OSError:
                pass  # the server may already have answered and closed
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.split(b"\r\n\r\n", 1)[1] or b"null")


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", " -0", "+5", "0x10", "1_0", "\u0663", "12 34", ""])
def test_not_a_non_negative_integer_is_400(server, value, capfd):
    status, body = raw_post(server, [value], send_after=b"x" * 1_000_000)
    assert status == 400 and "non-negative integer" in body["error"]
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("value", [str(MAX_BODY + 1), "99999999999999999999999999", "1" * 5000])
def test_huge_is_413_without_reading_it(server, value):
    status, body = raw_post(server, [value], send_after=b"x" * 1_000_000)
    assert status == 413 and str(MAX_BODY) in body["error"]


def test_two_lengths_are_400_and_none_is_411(server):
    assert raw_post(server, ["2", "2"], b"{}")[0] == 400
    assert raw_post(server, [])[0] == 411


def test_a_valid_length_still_works(server):
    body = json.dumps({"trial_key": server.app.items[0].key, **{lab: False for lab in LABELS}, "note": ""}).encode()
    status, reply = raw_post(server, [str(len(body))], body)
    assert status == 200 and reply["ok"] is True
    assert raw_post(server, ["0"])[0] == 400  # an empty body is not a label
