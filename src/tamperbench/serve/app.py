"""An OpenAI-compatible HTTP server over a local backend: ``/v1/models``, ``/v1/chat/completions``
and ``/v1/completions``, with top log-probs (up to 20), echo, stop sequences and max tokens.

Why FastAPI over a batching thread: handlers only validate, tokenise and wait; one thread owns the
model (:mod:`tamperbench.serve.batcher`), so concurrent requests become rows of one batch. Bodies are
capped before they are read, the key is compared in constant time, and errors use OpenAI's error shape
so the official client raises its usual exceptions.

Work nobody waits for is not done: a handler polls for its client's disconnect while its job runs and
abandons the job (its rows leave the batch). A full waiting line is a 503 with ``Retry-After``. Text is
tokenised on one worker thread, never on the event loop (a long body must not stall ``/v1/models``),
and only after a character check: text longer than the context times the longest token cannot fit.
"""

from __future__ import annotations

import asyncio
import hmac
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from tamperbench.errors import UserError
from tamperbench.serve.batcher import ContinuousBatcher, Job, QueueFull
from tamperbench.serve.schemas import ChatRequest, CompletionRequest

MAX_BODY = 8 * 1024 * 1024
DISCONNECT_POLL_S = 0.25  # how often a waiting handler checks that its client is still there
RETRY_AFTER_S = 2


class _Refused(Exception):
    """Raised inside a handler to answer with ``response`` (a full queue, a client that left)."""

    def __init__(self, response: JSONResponse):
        self.response = response


def max_text_chars(backend) -> int | None:
    """Characters beyond which a text surely exceeds the context: context length x the longest token
    (in characters) of the vocabulary. None when the backend has no tokenizer or context to read."""
    tok, ctx = getattr(backend, "tokenizer", None), getattr(backend, "max_context", None)
    if tok is None or not ctx or not hasattr(tok, "convert_ids_to_tokens"):
        return None
    longest = max((len(t) for t in tok.convert_ids_to_tokens(list(range(len(tok)))) if isinstance(t, str)), default=0)
    return int(ctx) * max(longest, 1)


def _error(status: int, message: str, kind: str, code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code}}, status_code=status)


class _BodyCap:
    """ASGI middleware: refuse a body over ``limit`` bytes or with a Content-Length that is not a
    non-negative integer, before the application reads it."""

    def __init__(self, app, limit: int = MAX_BODY):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        raw = headers.get(b"content-length")
        if raw is not None and (not raw.isdigit() or int(raw) > self.limit):
            resp = _error(413 if raw.isdigit() else 400, f"request body must be at most {self.limit} bytes "
                          "with a valid Content-Length", "invalid_request_error")
            return await resp(scope, receive, send)
        seen = 0

        async def capped():
            nonlocal seen
            msg = await receive()
            seen += len(msg.get("body", b""))
            if seen > self.limit:  # a chunked body past the cap: drop the request as if the client left
                return {"type": "http.disconnect"}
            return msg

        return await self.app(scope, capped, send)


def create_app(backend, *, model_name: str, api_key: str | None = None, max_batch: int = 16,
               max_queue: int = 64) -> FastAPI:
    app = FastAPI(title="tamperbench OpenAI-compatible server", docs_url=None, redoc_url=None)
    batcher = ContinuousBatcher(backend, max_batch=max_batch, max_queue=max_queue)
    app.state.batcher = batcher
    tokenise_pool = ThreadPoolExecutor(1, thread_name_prefix="tamperbench-tokenise")
    char_cap = max_text_chars(backend)
    created = int(time.time())
    vocab = int(backend.model.config.vocab_size)

    def token_text(tid: int, as_ids: bool) -> str:
        return f"token_id:{tid}" if as_ids else backend.decode([tid], skip_special_tokens=False)

    @app.exception_handler(_Refused)
    async def refused(_request: Request, err: _Refused):
        return err.response

    async def off_loop(fn, *args):
        return await asyncio.get_running_loop().run_in_executor(tokenise_pool, fn, *args)

    def check_chars(n: int, field: str) -> None:
        if char_cap is not None and n > char_cap:
            raise _Refused(_error(400, f"field '{field}': {n} characters cannot fit the model's context of "
                                  f"{backend.max_context} tokens", "invalid_request_error", "context_length_exceeded"))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, err: RequestValidationError):
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"] if p != "body")
        return _error(400, f"field '{loc}': {first['msg']}", "invalid_request_error")

    def check_model(name: str) -> JSONResponse | None:
        if name != model_name:
            return _error(404, f"The model '{name}' does not exist (this server serves '{model_name}')",
                          "invalid_request_error", "model_not_found")
        return None

    async def run(job: Job, request: Request) -> Job:
        """The finished job; a full queue is a 503, and a client that leaves abandons its job."""
        try:
            fut = asyncio.wrap_future(batcher.submit(job))
        except QueueFull:
            raise _Refused(JSONResponse(
                {"error": {"message": f"server busy: the batch's {batcher.max_batch} rows are taken and "
                                      f"{batcher.max_queue} requests wait beyond them; retry later",
                           "type": "server_error", "param": None, "code": "queue_full"}},
                status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})) from None
        while True:
            done, _ = await asyncio.wait({fut}, timeout=DISCONNECT_POLL_S)
            if done:
                return fut.result()
            if await request.is_disconnected():
                batcher.abandon(job)
                raise _Refused(_error(499, "client closed the request", "invalid_request_error"))

    def fits(n_prompt: int, budget: int) -> JSONResponse | None:
        try:
            from tamperbench.models.protocols import ensure_fits

            ensure_fits(n_prompt, budget, getattr(backend, "max_context", None), "request")
        except UserError as err:
            return _error(400, str(err), "invalid_request_error", "context_length_exceeded")
        return None

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": created,
                                            "owned_by": "tamperbench"}]}

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest, request: Request):
        if (bad := check_model(req.model)) is not None:
            return bad
        check_chars(sum(len(m.content) for m in req.messages), "messages")
        ids = await off_loop(backend.chat_ids, [m.model_dump() for m in req.messages])
        if (bad := fits(len(ids), req.budget)) is not None:
            return bad
        top = (req.top_logprobs or 0) if req.logprobs else 0
        job = await run(Job(ids, req.budget, req.stop, top, req.temperature, req.seed), request)
        text = job.text or backend.decode(job.tokens)
        logprobs = None
        if req.logprobs:
            content = []
            for i, tid in enumerate(job.tokens):
                t = token_text(tid, False)
                tops = [{"token": token_text(a, False), "logprob": b, "bytes": list(token_text(a, False).encode())}
                        for a, b in zip(job.top_ids[i], job.top_logprobs[i])] if top else []
                content.append({"token": t, "logprob": job.logprobs[i], "bytes": list(t.encode()), "top_logprobs": tops})
            logprobs = {"content": content}
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": model_name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": job.finish_reason, "logprobs": logprobs}],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(job.tokens),
                          "total_tokens": len(ids) + len(job.tokens)}}

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, request: Request):
        if (bad := check_model(req.model)) is not None:
            return bad
        if isinstance(req.prompt, list):
            if not req.prompt or any(not 0 <= t < vocab for t in req.prompt):
                return _error(400, f"field 'prompt': token ids must be a non-empty list in [0, {vocab})",
                              "invalid_request_error")
            ids, prompt_text = list(req.prompt), await off_loop(lambda: backend.decode(req.prompt, skip_special_tokens=False))
        else:
            check_chars(len(req.prompt), "prompt")
            ids, prompt_text = await off_loop(backend.encode, req.prompt), req.prompt
            if not ids:
                return _error(400, "field 'prompt': empty prompt", "invalid_request_error")
        if (bad := fits(len(ids), req.max_tokens)) is not None:
            return bad
        top = req.logprobs or 0
        scored = None  # the prompt's own log-probs (echo): a batcher job like decoding, queued and cancellable
        if req.echo and req.logprobs is not None:
            scored = await run(Job(ids, 0, top=top, score_prompt=True), request)
        if req.max_tokens == 0:
            job = Job(ids, 0, finish_reason="length")
        else:
            job = await run(Job(ids, req.max_tokens, req.stop, top, req.temperature, req.seed), request)
        text = job.text or backend.decode(job.tokens)
        toks, lps = list(job.tokens), list[float | None](job.logprobs)
        tops: list[dict | None] = []
        if req.logprobs is not None:
            tops = [dict(zip((token_text(a, req.return_tokens_as_token_ids) for a in ids_), lp_))
                    for ids_, lp_ in zip(job.top_ids, job.top_logprobs)] if top else [None] * len(toks)
        if req.echo:
            text = prompt_text + text
            if scored is not None:
                as_ids = req.return_tokens_as_token_ids
                p_top = [dict(zip((token_text(a, as_ids) for a in ids_), lp_)) if top and i else None
                         for i, (ids_, lp_) in enumerate(zip(scored.prompt_top_ids, scored.prompt_top_logprobs))]
                toks, lps, tops = ids + toks, scored.prompt_logprobs + lps, p_top + tops
        logprobs = None
        if req.logprobs is not None:
            strs = [token_text(t, req.return_tokens_as_token_ids) for t in toks]
            offsets, pos = [], 0
            for s in strs:
                offsets.append(pos)
                pos += len(s)
            logprobs = {"tokens": strs, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": model_name,
                "choices": [{"index": 0, "text": text, "finish_reason": job.finish_reason, "logprobs": logprobs}],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(job.tokens),
                          "total_tokens": len(ids) + len(job.tokens)}}

    if api_key is not None:
        app.add_middleware(_KeyCheck, api_key=api_key)
    app.add_middleware(_BodyCapMiddleware)
    return app


class _KeyCheck:
    """ASGI middleware: every HTTP request must send ``Authorization: Bearer KEY`` (compared in constant
    time). Plain ASGI, not ``@app.middleware``: Starlette's BaseHTTPMiddleware wraps ``receive`` so
    that a handler never sees its client disconnect, and abandoned requests could not be cancelled."""

    def __init__(self, app, api_key: str):
        self.app, self.expected = app, f"Bearer {api_key}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                resp = _error(401, "invalid or missing API key", "invalid_request_error", "invalid_api_key")
                return await resp(scope, receive, send)
        return await self.app(scope, receive, send)


class _BodyCapMiddleware(_BodyCap):
    """Starlette's ``add_middleware`` form of :class:`_BodyCap`."""

