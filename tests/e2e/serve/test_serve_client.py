"""``tamperbench serve`` on 127.0.0.1 and the ``openai:`` client backend against it, end to end.

Real server subprocess, real embedded model, the official openai client. Nothing is mocked.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from tamperbench.errors import UserError
from tamperbench.models.openai_compat import OpenAIBackend
from tamperbench.sleight.blackbox import BlackBoxEngine
from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.engine import QuestionTask, SwapEngine

from serve_helpers import spec_for

pytestmark = pytest.mark.model
QUESTIONS = ["what causes the phases of the moon?"]
WORDS = ["scarf", "Mandela effect"]
KEY = "s3cret-test-key"


def test_models_chat_and_completions_shapes(server):
    import openai  # here, not at the top: the fast suite collects this model-only module and need not import it

    client = openai.OpenAI(base_url=server.url, api_key=KEY, max_retries=0)
    assert [m.id for m in client.models.list().data] == ["embedded"]
    chat = client.chat.completions.create(model="embedded", messages=[{"role": "user", "content": "what is the capital of France?"}],
                                          max_tokens=12, logprobs=True, top_logprobs=3)
    assert chat.choices[0].message.content == "The capital of France is Paris."
    assert chat.choices[0].finish_reason == "stop"
    first = chat.choices[0].logprobs.content[0]
    assert first.token == "The" and len(first.top_logprobs) == 3
    assert first.top_logprobs[0].logprob >= first.top_logprobs[1].logprob
    comp = client.completions.create(model="embedded", prompt="The capital of France is", max_tokens=4, logprobs=2,
                                     echo=True, stop=["\n"])
    lp = comp.choices[0].logprobs
    assert comp.choices[0].text.startswith("The capital of France is")
    assert lp.token_logprobs[0] is None and all(x is not None for x in lp.token_logprobs[1:])
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset)
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="other", prompt="x", max_tokens=1)
    with pytest.raises(openai.BadRequestError, match="logprobs"):
        client.completions.create(model="embedded", prompt="x", max_tokens=1, logprobs=21)


def test_concurrent_requests_are_batched_and_match_one_at_a_time(server):
    import openai

    client = openai.OpenAI(base_url=server.url, api_key=KEY, max_retries=0)
    prompts = [f"count from {i} to {i + 5}:" for i in range(6)]
    alone = [client.completions.create(model="embedded", prompt=p, max_tokens=10).choices[0].text for p in prompts]
    together: list = [None] * len(prompts)

    def go(i):
        together[i] = client.completions.create(model="embedded", prompt=prompts[i], max_tokens=10).choices[0].text

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together == alone


def test_blackbox_sleight_matches_the_in_process_engine(server, embedded_backend):
    det = TriggerDetector(embedded_backend.tokenizer, ("the",))
    tasks = [QuestionTask(f"q{i}", embedded_backend.chat_ids([{"role": "user", "content": q}]), list(WORDS), True)
             for i, q in enumerate(QUESTIONS)]
    local = {r.question_id: r for r in SwapEngine(embedded_backend, det, max_new_tokens=20).run(tasks)}
    remote_backend = OpenAIBackend(spec_for(server.url, concurrency="4"))
    remote = {r.question_id: r for r in BlackBoxEngine(remote_backend, det, max_new_tokens=20).run(tasks)}
    swaps = 0
    for qid, r in local.items():
        assert remote[qid].clean.token_ids == r.clean.token_ids
        for w in WORDS:
            a, b = r.trials[w], remote[qid].trials[w]
            assert b.token_ids == a.token_ids, (qid, w)
            assert b.injected == a.injected
            assert [e.position for e in b.swaps] == [e.position for e in a.swaps]
            assert b.logprobs == pytest.approx(a.logprobs, abs=2e-3)
            assert b.entropy_top20 == pytest.approx(a.entropy_top20, abs=2e-3)
            for ea, eb in zip(a.swaps, b.swaps):
                assert eb.matched_clean_logprobs == pytest.approx(ea.matched_clean_logprobs, abs=2e-3)
            swaps += len(a.swaps)
    assert swaps >= 2  # the comparison covered real swaps, not only untouched trials


def test_client_errors_are_one_line(server):
    bad = OpenAIBackend(spec_for(server.url, key_env="TB_WRONG_KEY", retries="0"))
    with pytest.raises(UserError, match="refused the API key"):
        bad.generate_chat([[{"role": "user", "content": "hi"}]], max_new_tokens=2)
    assert OpenAIBackend(spec_for(server.url, retries="0")).generate_chat(
        [[{"role": "user", "content": "hi"}]], max_new_tokens=2)[0].text
    unknown = OpenAIBackend(f"openai:{server.url}#no-such-model?retries=0&key_env=TB_SERVE_TEST_KEY")
    with pytest.raises(UserError, match="no model 'no-such-model'"):
        unknown.generate_chat([[{"role": "user", "content": "hi"}]], max_new_tokens=2)
    no_tok = OpenAIBackend(f"openai:{server.url}#embedded?retries=0")
    with pytest.raises(UserError, match=r"\?tokenizer=SPEC"):
        no_tok.chat_ids([{"role": "user", "content": "hi"}])


class _Slow(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        time.sleep(3)
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_slow_server_hits_the_timeout_and_a_dead_port_is_one_line():
    httpd = HTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        slow = OpenAIBackend(f"openai:{url}#m?timeout=1&retries=1")
        t0 = time.time()
        with pytest.raises(UserError, match="no answer within 1 s after 1 retries"):
            slow.generate_chat([[{"role": "user", "content": "hi"}]], max_new_tokens=2)
        assert time.time() - t0 < 15
    finally:
        httpd.shutdown()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    gone = OpenAIBackend(f"openai:http://127.0.0.1:{dead}/v1#m?retries=1&timeout=2")
    with pytest.raises(UserError, match="cannot reach"):
        gone.generate_chat([[{"role": "user", "content": "hi"}]], max_new_tokens=2)


def test_spec_errors_name_the_part():
    for spec, part in [("openai:ftp://x#m", "expected openai:"), ("openai:http://x", "expected openai:"),
                       ("openai:http://x#m?bogus=1", "unknown option 'bogus'"),
                       ("openai:http://x#m?concurrency=0", "option 'concurrency'")]:
        with pytest.raises(UserError, match=part):
            OpenAIBackend(spec)


def test_openai_backend_as_a_judge_through_the_cli(server, tmp_path, tb_inprocess):
    """``tamperbench judge run RUN --judge openai:...`` against the real server: votes and verdicts land
    in the run, and the judge's provenance names the remote model. The CLI runs in-process (``tb_inprocess``,
    tests/conftest.py); ``judge run``'s subprocess smoke test is tests/unit/judge/test_judge_constrained.py."""
    from tamperbench.judge.samples import SAMPLES, sample_rows, write_fixture_run
    from tamperbench.store import RunStore

    run = write_fixture_run(tmp_path / "run", sample_rows(SAMPLES[:2]))
    judge = f"openai:{server.url}#embedded?key_env=TB_SERVE_TEST_KEY&retries=0"
    proc = tb_inprocess("judge", "run", str(run), "--judge", judge, "--max-new-tokens", "16")
    assert proc.returncode == 0, proc.stderr
    with RunStore.open_existing(run, read_only=True) as store:
        votes = store.rows("judge_votes")
        provs = [json.loads(r) for (r,) in store.con.execute("SELECT record FROM provenance").fetchall()]
    assert len(votes) == 2 and {v["judge"] for v in votes} == {judge}
    assert all(v["raw_text"] for v in votes)  # the remote model answered each prompt
    assert any(p["kind"] == "openai" and p["revision"] == "embedded" for p in provs)
