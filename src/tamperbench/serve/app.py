"""An OpenAI-compatible HTTP server over a local backend: ``/v1/models``, ``/v1/chat/completions``
and ``/v1/completions``, with top log-probs (up to 20), echo, stop sequences and max tokens.

Why FastAPI over a batching thread: handlers only validate, tokenise and wait; one thread owns the
model (:mod:`tamperbench.serve.batcher`), so concurrent requests become rows of one batch. Bodies are
capped before they are read, the key is compared in constant time, and errors use OpenAI's error shape
so the official client raises its usual exceptions.
"""

from __future__ import annotations

import asyncio
import hmac
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from tamperbench.errors import UserError
from tamperbench.serve.batcher import ContinuousBatcher, Job
from tamperbench.serve.schemas import ChatRequest, CompletionRequest

MAX_BODY = 8 * 1024 * 1024


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


def create_app(backend, *, model_name: str, api_key: str | None = None, max_batch: int = 16) -> FastAPI:
    app = FastAPI(title="tamperbench OpenAI-compatible server", docs_url=None, redoc_url=None)
    batcher = ContinuousBatcher(backend, max_batch=max_batch)
    app.state.batcher = batcher
    created = int(time.time())
    vocab = int(backend.model.config.vocab_size)

    def token_text(tid: int, as_ids: bool) -> str:
        return f"token_id:{tid}" if as_ids else backend.decode([tid], skip_special_tokens=False)

    @app.middleware("http")
    async def auth(request: Request, call_next):
        if api_key is not None:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
                return _error(401, "invalid or missing API key", "invalid_request_error", "invalid_api_key")
        return await call_next(request)

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

    async def run(job: Job) -> Job:
        return await asyncio.wrap_future(batcher.submit(job))

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
    async def chat(req: ChatRequest):
        if (bad := check_model(req.model)) is not None:
            return bad
        ids = backend.chat_ids([m.model_dump() for m in req.messages])
        if (bad := fits(len(ids), req.budget)) is not None:
            return bad
        top = (req.top_logprobs or 0) if req.logprobs else 0
        job = await run(Job(ids, req.budget, req.stop, top, req.temperature, req.seed))
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
    async def completions(req: CompletionRequest):
        if (bad := check_model(req.model)) is not None:
            return bad
        if isinstance(req.prompt, list):
            if not req.prompt or any(not 0 <= t < vocab for t in req.prompt):
                return _error(400, f"field 'prompt': token ids must be a non-empty list in [0, {vocab})",
                              "invalid_request_error")
            ids, prompt_text = list(req.prompt), backend.decode(req.prompt, skip_special_tokens=False)
        else:
            ids, prompt_text = backend.encode(req.prompt), req.prompt
            if not ids:
                return _error(400, "field 'prompt': empty prompt", "invalid_request_error")
        if (bad := fits(len(ids), req.max_tokens)) is not None:
            return bad
        top = req.logprobs or 0
        if req.max_tokens == 0:
            job = Job(ids, 0, finish_reason="length")
        else:
            job = await run(Job(ids, req.max_tokens, req.stop, top, req.temperature, req.seed))
        text = job.text or backend.decode(job.tokens)
        toks, lps = list(job.tokens), list(job.logprobs)
        tops: list[dict | None] = []
        if req.logprobs is not None:
            tops = [dict(zip((token_text(a, req.return_tokens_as_token_ids) for a in ids_), lp_))
                    for ids_, lp_ in zip(job.top_ids, job.top_logprobs)] if top else [None] * len(toks)
        if req.echo:
            text = prompt_text + text
            if req.logprobs is not None:
                p_lp, p_top = await asyncio.to_thread(_prompt_logprobs, backend, ids, top, req.return_tokens_as_token_ids,
                                                      token_text)
                toks, lps, tops = ids + toks, p_lp + lps, p_top + tops
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

    app.add_middleware(_BodyCapMiddleware)
    return app


class _BodyCapMiddleware(_BodyCap):
    """Starlette's ``add_middleware`` form of :class:`_BodyCap`."""


def _prompt_logprobs(backend, ids: list[int], top: int, as_ids: bool, token_text) -> tuple[list, list]:
    """Teacher-forced log-probs of the prompt's own tokens (echo): None for the first, as OpenAI does."""
    lps: list = [None]
    tops: list = [None]
    for positions, chunk in backend.next_token_distributions(ids, chunk_size=128):
        for pos, row in zip(positions, chunk):
            if pos + 1 >= len(ids):
                continue
            lps.append(float(row[ids[pos + 1]]))
            if top:
                vals, idx = row.topk(top)
                tops.append({token_text(int(a), as_ids): float(b) for a, b in zip(idx, vals)})
            else:
                tops.append(None)
    return lps, tops
