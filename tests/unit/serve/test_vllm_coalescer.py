"""The vLLM backend's request coalescer, without vLLM: concurrent calls become batched calls of a plain
function (the function stands in for ``LLM.generate``, which needs a GPU that this machine lacks)."""

from __future__ import annotations

import threading
import time

import pytest

from tamperbench.errors import UserError
from tamperbench.models.vllm_backend import Coalescer, _opts


def test_concurrent_calls_are_batched_in_order_and_each_gets_its_own_result():
    calls: list[list[int]] = []

    def fn(batch):
        calls.append(list(batch))
        time.sleep(0.05)
        return [x * 10 for x in batch]

    co = Coalescer(fn, max_batch=8)
    results: dict[int, int] = {}

    def go(i):
        results[i] = co.submit(i)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: i * 10 for i in range(20)}
    assert sum(len(c) for c in calls) == 20 and len(calls) < 20  # some calls were coalesced
    assert all(len(c) <= 8 for c in calls)


def test_an_error_reaches_every_caller_of_its_batch():
    co = Coalescer(lambda batch: (_ for _ in ()).throw(RuntimeError("gpu fell over")))
    with pytest.raises(RuntimeError, match="gpu fell over"):
        co.submit(1)


def test_spec_options_are_checked():
    assert _opts("vllm:org/m?max_model_len=4096") == ("org/m", {"max_model_len": 4096})
    with pytest.raises(UserError, match="unknown option 'bogus'"):
        _opts("vllm:org/m?bogus=1")
    with pytest.raises(UserError, match="must be a int"):
        _opts("vllm:org/m?max_model_len=big")
