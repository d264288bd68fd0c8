"""Issue 35 (High 1 and the ``--max-queue 0`` Low item) over real HTTP on 127.0.0.1: the server
(``create_app`` under uvicorn, in a thread of this process so the test can read its batcher) over the
real embedded model.

- The prompt log-probability path (``/v1/completions`` with echo, logprobs and max_tokens 0) used to run
  on a thread of its own, outside the queue and the cancel-on-disconnect: clients that left after 1 s
  left their whole prompt's forward passes behind, and a 2-token chat waited for them.
- ``--max-queue 0`` used to refuse every request, even on an idle server.
"""

from __future__ import annotations

import time

import pytest
from serve_helpers import live_server, post, send, wait_for

pytestmark = pytest.mark.model

LONG = "the cat sat on the mat. " * 400  # 2,801 tokens of the embedded model's tokenizer
ECHO = {"model": "embedded", "prompt": LONG, "echo": True, "logprobs": 1, "max_tokens": 0}
CHAT = {"model": "embedded", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def test_abandoned_echo_requests_do_not_slow_a_chat(embedded_backend):
    with live_server(embedded_backend, max_batch=4, max_queue=8) as (port, batcher):
        assert post(port, "/v1/chat/completions", CHAT)[0] == 200  # warm: a fresh server's first chat is slower
        gone = [send(port, "/v1/completions", ECHO) for _ in range(4)]
        time.sleep(1.0)
        for s in gone:
            s.close()  # each left about 2,800 tokens of forward passes behind
        time.sleep(0.5)  # the handlers see their clients gone at their next poll (0.25 s)
        t = time.perf_counter()
        status, _, out = post(port, "/v1/chat/completions", CHAT, timeout=60)
        took = time.perf_counter() - t
        assert status == 200 and out["usage"]["completion_tokens"] == 2
        assert took < 3.0, f"a 2-token chat took {took:.1f} s behind abandoned echo requests"
        assert wait_for(lambda: batcher.stats["active"] == 0 and batcher.waiting() == 0, 10)
        assert batcher.stats["dropped"] >= 4


def test_echo_requests_wait_in_the_same_queue_and_a_full_one_is_503(embedded_backend):
    with live_server(embedded_backend, max_batch=1, max_queue=1) as (port, batcher):
        socks = [send(port, "/v1/completions", ECHO)]
        assert wait_for(lambda: batcher.stats["active"] == 1, 30)  # the echo request holds the batch's one row
        socks.append(send(port, "/v1/completions", ECHO))
        assert wait_for(lambda: batcher.waiting() == 1, 10)
        status, headers, out = post(port, "/v1/completions", ECHO)
        assert status == 503 and headers.get("retry-after") == "2" and out["error"]["code"] == "queue_full"
        for s in socks:
            s.close()
        assert wait_for(lambda: batcher.stats["active"] == 0 and batcher.waiting() == 0, 10)


def test_echo_logprobs_are_the_same_through_the_batcher(embedded_backend):
    """The echoed prompt's log-probs equal the backend's own teacher-forced ones (first token None)."""
    with live_server(embedded_backend, max_batch=2) as (port, _batcher):
        body = {"model": "embedded", "prompt": "The capital of France is", "echo": True, "logprobs": 2,
                "max_tokens": 1}
        status, _, out = post(port, "/v1/completions", body)
    assert status == 200
    lp = out["choices"][0]["logprobs"]
    ids = embedded_backend.encode("The capital of France is")
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    want = [float(row[ids[p + 1]]) for positions, chunk in embedded_backend.next_token_distributions(ids)
            for p, row in zip(positions, chunk) if p + 1 < len(ids)]
    assert lp["token_logprobs"][1:len(ids)] == pytest.approx(want, abs=1e-4)
    assert all(len(t) == 2 for t in lp["top_logprobs"][1:])
    assert len(lp["tokens"]) == len(ids) + 1


def test_max_queue_zero_means_no_queue_beyond_the_running_batch(embedded_backend):
    with live_server(embedded_backend, max_batch=1, max_queue=0) as (port, batcher):
        status, _, out = post(port, "/v1/chat/completions", CHAT)
        assert status == 200, out  # an idle server answers
        busy = send(port, "/v1/completions", {"model": "embedded", "prompt": "Once upon a time", "max_tokens": 4096})
        assert wait_for(lambda: batcher.stats["active"] == 1, 30)
        status, headers, out = post(port, "/v1/chat/completions", CHAT)
        assert status == 503 and out["error"]["code"] == "queue_full"
        busy.close()
        assert wait_for(lambda: batcher.stats["active"] == 0, 10)
