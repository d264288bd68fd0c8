"""``openai:<base_url>#<model>[?tokenizer=SPEC&key_env=VAR&concurrency=N&timeout=S&retries=N]``: a
backend over any OpenAI-compatible server (vLLM, a closed API, ``tamperbench serve``).

Built on the official ``openai`` client: its retries (exponential backoff on 429, 5xx, connection
errors and timeouts) and per-request timeouts are used as they are, not re-implemented. Concurrency
is a thread pool of ``concurrency`` requests in flight. The API key comes from ``OPENAI_API_KEY`` or
the variable named by ``key_env``, never from the spec string (which is recorded in provenance).

What it offers: chat generation (quote, the jury) and token-level completions with log-probs
(black-box Sleight of Word). The latter needs the model's tokenizer on this machine (``tokenizer=``
a local model spec whose tokenizer matches the server's) for the trigger detector, and a server that
accepts token-id prompts and returns token ids (``return_tokens_as_token_ids``, as vLLM and
``tamperbench serve`` do). It has no hooks and no step decoder: suites needing those refuse it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import tamperbench
from tamperbench.errors import UserError
from tamperbench.models.protocols import Generation, GenerationProgress, ProgressListener
from tamperbench.models.provenance import ModelProvenance

_OPTIONS = {"tokenizer", "key_env", "concurrency", "timeout", "retries"}


@dataclass(frozen=True)
class Completion:
    """One completion: generated token ids with their log-probs and top log-probs by token id."""

    token_ids: list[int]
    logprobs: list[float]
    top: list[dict[int, float]]
    finish_reason: str
    prompt_logprobs: list[float | None] | None = None  # echo: teacher-forced log-probs of the prompt
    prompt_top: list[dict[int, float] | None] | None = None


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """``openai:URL#MODEL?opts`` -> (url, model, options); any problem names the part."""
    body = spec.removeprefix("openai:")
    url, sep, rest = body.partition("#")
    if not sep or not url.startswith(("http://", "https://")) or not rest:
        raise UserError(f"model '{spec}': expected openai:<http(s)://base_url>#<model>[?tokenizer=SPEC&key_env=VAR]")
    model, _, query = rest.partition("?")
    opts = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    unknown = sorted(set(opts) - _OPTIONS)
    if unknown:
        raise UserError(f"model '{spec}': unknown option '{unknown[0]}' (known: {', '.join(sorted(_OPTIONS))})")
    return url.rstrip("/"), model, opts


def _int_opt(spec: str, opts: dict, name: str, default: int, lo: int, hi: int) -> int:
    try:
        value = int(opts.get(name, default))
    except ValueError:
        raise UserError(f"model '{spec}': option '{name}' must be an integer") from None
    if not lo <= value <= hi:
        raise UserError(f"model '{spec}': option '{name}' must be {lo} to {hi}, got {value}")
    return value


class OpenAIBackend:
    """Chat generation and token-level completions over HTTP (see the module docstring)."""

    server_side_template = True  # the server applies the chat template; template kwargs go as chat_template_kwargs

    def __init__(self, spec: str, *, batch_size: int | None = None, chat_template: str | None = None):
        import openai

        self.spec = spec
        self.base_url, self.model_name, opts = parse_spec(spec)
        self.concurrency = _int_opt(spec, opts, "concurrency", batch_size or 8, 1, 512)
        self.timeout = float(_int_opt(spec, opts, "timeout", 120, 1, 3600))
        retries = _int_opt(spec, opts, "retries", 4, 0, 20)
        key_env = opts.get("key_env", "OPENAI_API_KEY")
        self.client = openai.OpenAI(base_url=self.base_url, api_key=os.environ.get(key_env) or "EMPTY",
                                    max_retries=retries, timeout=self.timeout)
        self.max_batch_size = self.concurrency
        self.max_context = 0  # unknown to the client: the server refuses over-long prompts itself
        self.tokenizer: Any = None  # a transformers tokenizer when option 'tokenizer' is given
        self.eos_ids: list[int] = []
        if opts.get("tokenizer"):
            self._load_tokenizer(opts["tokenizer"])
        self.provenance = ModelProvenance(
            source=spec.split("?", 1)[0], kind="openai", resolved_path=self.base_url, sha256="unverified-remote",
            revision=self.model_name, architecture=None, tamperbench_version=tamperbench.__version__,
            chat_template="server" if chat_template in (None, "model") else str(chat_template))

    @classmethod
    def from_spec(cls, spec: str, *, device: str = "auto", dtype: str | None = None, batch_size: int | None = None,
                  chat_template: str | None = None) -> "OpenAIBackend":
        del device, dtype  # the server decides both; recorded as unknown
        return cls(spec, batch_size=batch_size, chat_template=chat_template)

    def _load_tokenizer(self, tok_spec: str) -> None:
        from transformers import AutoTokenizer

        from tamperbench.models.sources import resolve

        src = resolve(tok_spec)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(src.load_dir)
        except Exception as err:  # noqa: BLE001 - any tokenizer failure is the user's spec
            raise UserError(f"model '{self.spec}': option 'tokenizer': cannot load {tok_spec} ({err})") from None
        eos = self.tokenizer.eos_token_id
        self.eos_ids = [int(eos)] if eos is not None else []

    @property
    def provenance_id(self) -> str:
        return self.provenance.id

    # ---------------------------------------------------------------- errors
    def _call(self, fn, **kwargs):
        import openai

        try:
            return fn(model=self.model_name, **kwargs)
        except openai.AuthenticationError:
            raise UserError(f"model '{self.provenance.source}': the server refused the API key (401); set "
                            "OPENAI_API_KEY or name another variable with ?key_env=VAR") from None
        except openai.NotFoundError as err:
            raise UserError(f"model '{self.provenance.source}': the server has no model '{self.model_name}' "
                            f"or no such endpoint (404: {_message(err)})") from None
        except openai.APITimeoutError:
            raise UserError(f"model '{self.provenance.source}': no answer within {self.timeout:.0f} s after "
                            f"{self.client.max_retries} retries") from None
        except openai.APIConnectionError as err:
            raise UserError(f"model '{self.provenance.source}': cannot reach {self.base_url} after "
                            f"{self.client.max_retries} retries ({err.__cause__ or err})") from None
        except openai.APIStatusError as err:
            raise UserError(f"model '{self.provenance.source}': the server answered {err.status_code} "
                            f"({_message(err)})") from None

    def _need_tokenizer(self, what: str):
        if self.tokenizer is None:
            raise UserError(f"model '{self.provenance.source}': {what} needs the model's tokenizer here; add "
                            "?tokenizer=SPEC (a local model spec with the same tokenizer) to the model spec")
        return self.tokenizer

    # ---------------------------------------------------------------- chat
    def chat_text(self, messages: Sequence[dict], *, system: str | None = None,
                  template_kwargs: dict | None = None) -> str:
        """The exact request content: the server applies its own template, so this is the JSON sent."""
        return json.dumps(self._messages(messages, system), ensure_ascii=False)

    def chat_ids(self, messages: Sequence[dict], *, system: str | None = None,
                 template_kwargs: dict | None = None) -> list[int]:
        tok = self._need_tokenizer("token ids of a chat prompt")
        out = tok.apply_chat_template(self._messages(messages, system), add_generation_prompt=True,
                                      tokenize=True, **(template_kwargs or {}))
        return list(out["input_ids"] if hasattr(out, "keys") else out)

    @staticmethod
    def _messages(messages: Sequence[dict], system: str | None) -> list[dict]:
        msgs = [dict(m) for m in messages]
        return ([{"role": "system", "content": system}] if system is not None else []) + msgs

    def generate_chat(self, conversations: Sequence[Sequence[dict]], *, max_new_tokens: int,
                      temperature: float = 0.0, seed: int | Sequence[int] = 0, stop: list[str] | None = None,
                      system: str | None = None, template_kwargs: dict | None = None,
                      progress: ProgressListener | None = None) -> list[Generation]:
        """One request per conversation (``concurrency`` at a time); ``progress`` hears once, when all are back.
        ``seed``: the request's ``seed``, one per conversation or one for all (a server may ignore it)."""
        t0 = time.perf_counter()
        seeds = list(seed) if not isinstance(seed, int) else [seed] * len(conversations)
        if len(seeds) != len(conversations):
            raise ValueError(f"{len(seeds)} seeds for {len(conversations)} conversations")

        def one(job):
            conv, seed = job
            msgs = self._messages(conv, system)
            extra = {"extra_body": {"chat_template_kwargs": dict(template_kwargs)}} if template_kwargs else {}
            resp = self._call(self.client.chat.completions.create, messages=msgs, max_tokens=max_new_tokens,
                              temperature=temperature, seed=seed, stop=stop or None, **extra)
            choice = resp.choices[0]
            reason = {"length": "length"}.get(choice.finish_reason, "stop" if stop else "eos")
            return Generation(text=choice.message.content or "", token_ids=[], prompt_text=json.dumps(msgs, ensure_ascii=False),
                              prompt_ids=[], finish_reason=reason)

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            gens = list(pool.map(one, zip(conversations, seeds)))
        if progress:
            progress(GenerationProgress(len(gens), len(gens), 0, time.perf_counter() - t0))
        return gens

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        return self._need_tokenizer("decoding token ids").decode(list(ids), skip_special_tokens=skip_special_tokens)

    def encode(self, text: str) -> list[int]:
        return list(self._need_tokenizer("encoding text").encode(text, add_special_tokens=False))

    # ---------------------------------------------------------------- completions with log-probs
    def complete(self, prompt_ids: Sequence[int], *, max_tokens: int, top: int = 20, echo: bool = False,
                 needed_by: str = "black-box Sleight of Word") -> Completion:
        """Greedy continuation of a token-id prompt with per-token and top-``top`` log-probs."""
        resp = self._call(self.client.completions.create, prompt=list(prompt_ids), max_tokens=max_tokens,
                          temperature=0.0, logprobs=top, echo=echo,
                          extra_body={"return_tokens_as_token_ids": True})
        choice = resp.choices[0]
        lp = choice.logprobs
        if lp is None or lp.token_logprobs is None:
            raise UserError(f"model '{self.provenance.source}': the server returned no log-probs; {needed_by} "
                            "needs them (use a server that supports 'logprobs' on /v1/completions)")
        ids = [_token_id(t, self.provenance.source) for t in lp.tokens]
        tops = [{_token_id(k, self.provenance.source): float(v) for k, v in (d or {}).items()}
                for d in (lp.top_logprobs or [None] * len(ids))]
        lps = list(lp.token_logprobs)
        n_prompt = len(prompt_ids) if echo else 0
        return Completion(token_ids=ids[n_prompt:], logprobs=[float(x) for x in lps[n_prompt:]], top=tops[n_prompt:],
                          finish_reason=choice.finish_reason or "length",
                          prompt_logprobs=lps[:n_prompt] if echo else None,
                          prompt_top=[*tops[:n_prompt]] if echo else None)  # a display: typed as the field


def _token_id(token: str, source: str) -> int:
    head, _, tail = token.partition("token_id:")
    if head or not tail.isdigit():
        raise UserError(f"model '{source}': the server does not return token ids (got token {token[:40]!r}); "
                        "black-box Sleight of Word needs 'return_tokens_as_token_ids' (vLLM, tamperbench serve)")
    return int(tail)


def _message(err) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:200]
    return str(err)[:200]
