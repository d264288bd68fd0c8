"""Issue 29.4-29.6 over real HTTP on 127.0.0.1: the server (``create_app`` under uvicorn, in a thread of
this process so the test can read its batcher) over the real embedded model.

- Clients that send long requests (max_tokens 4096) and disconnect: their rows leave the batch at
  once, and a short request sent after them is answered in seconds (it used to wait behind them).
- A full waiting line is a 503 with ``Retry-After``, not unbounded latency.
- ``seed`` 2^70 is a 400 naming the field (it was a 500); a tiny temperature samples, never NaN.
- A chat body too long for any tokenisation to fit is refused before it is tokenised.
"""

from __future__ import annotations

import http.client
import time

import pytest
from serve_helpers import live_server, post, send, wait_for

pytestmark = pytest.mark.model

PROMPT = "Once upon a time, in a small village by the sea,"


def test_abandoned_requests_leave_the_batch_and_a_short_one_is_answered(embedded_backend):
    with live_server(embedded_backend, max_batch=4) as (port, batcher):
        gone = [send(port, "/v1/completions", {"model": "embedded", "prompt": PROMPT, "max_tokens": 4096})
                for _ in range(6)]  # 4 decoding rows and 2 waiting
        assert wait_for(lambda: batcher.stats["max_rows"] == 4 and batcher.stats["steps"] > 1, 60)  # decoding
        for s in gone:
            s.close()
        t = time.perf_counter()
        status, _, out = post(port, "/v1/completions", {"model": "embedded", "prompt": PROMPT, "max_tokens": 2},
                              timeout=30)
        took = time.perf_counter() - t
        assert status == 200 and out["usage"]["completion_tokens"] == 2
        assert took < 10, took  # it used to wait for 4 x 4096 tokens
        assert wait_for(lambda: batcher.stats["active"] == 0 and batcher.waiting() == 0, 10)
        assert batcher.stats["dropped"] == 6
        assert batcher.stats["tokens"] < 6 * 400  # nowhere near 6 x 4096 tokens were decoded


def test_a_full_queue_is_503_with_retry_after(embedded_backend):
    with live_server(embedded_backend, max_batch=1, max_queue=1) as (port, batcher):
        socks = [send(port, "/v1/completions", {"model": "embedded", "prompt": PROMPT, "max_tokens": 4096})]
        assert wait_for(lambda: batcher.stats["active"] == 1, 30)
        socks.append(send(port, "/v1/completions", {"model": "embedded", "prompt": PROMPT, "max_tokens": 4096}))
        assert wait_for(lambda: batcher.waiting() == 1, 10)
        status, headers, out = post(port, "/v1/completions", {"model": "embedded", "prompt": PROMPT, "max_tokens": 2})
        assert status == 503 and headers.get("retry-after") == "2" and out["error"]["code"] == "queue_full"
        assert batcher.stats["refused"] == 1
        for s in socks:
            s.close()
        assert wait_for(lambda: batcher.stats["active"] == 0 and batcher.waiting() == 0, 10)


def test_request_numbers_out_of_range_and_long_text(embedded_backend):
    with live_server(embedded_backend, max_batch=2) as (port, _batcher):
        chat = {"model": "embedded", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        status, _, out = post(port, "/v1/chat/completions", {**chat, "temperature": 0.7, "seed": 2**70})
        assert status == 400 and "'seed'" in out["error"]["message"]
        status, _, out = post(port, "/v1/chat/completions", {**chat, "temperature": 1e-300, "seed": -5})
        assert status == 200 and out["usage"]["completion_tokens"] >= 1  # sampled, one-hot: no NaN, no 500
        long = {**chat, "messages": [{"role": "user", "content": "x" * 999_000}]}
        t = time.perf_counter()
        status, _, out = post(port, "/v1/chat/completions", long)
        assert status == 400 and "'messages'" in out["error"]["message"] and "characters" in out["error"]["message"]
        assert time.perf_counter() - t < 5  # refused before tokenising


def test_long_bodies_are_tokenised_off_the_event_loop(embedded_backend):
    """Three chat bodies under the character cap, sent together: while they are tokenised (each then
    refused as too long for the context), /v1/models still answers at once."""
    from concurrent.futures import ThreadPoolExecutor

    with live_server(embedded_backend, max_batch=2) as (port, _batcher):
        body = {"model": "embedded", "max_tokens": 2,
                "messages": [{"role": "user", "content": "word " * 80_000}]}  # 400k characters
        with ThreadPoolExecutor(3) as pool:
            futs = [pool.submit(post, port, "/v1/chat/completions", body) for _ in range(3)]
            time.sleep(0.3)
            slowest = 0.0
            while not all(f.done() for f in futs):
                t = time.perf_counter()
                con = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                con.request("GET", "/v1/models")
                assert con.getresponse().status == 200
                slowest = max(slowest, time.perf_counter() - t)
            assert all(f.result()[0] == 400 for f in futs)  # over the context, refused after tokenising
        assert slowest < 1.0, slowest
