"""``vllm:<model>[?gpu_memory_utilization=F&max_model_len=N&tensor_parallel_size=N]``: vLLM on a GPU.

For throughput on GPU nodes, as the papers' own runs used. It offers chat generation (quote, the
jury) and token-level completions with log-probs (:meth:`complete`, the black-box Sleight of Word
engine: stop at the trigger, splice, resubmit, with vLLM's prefix caching making every resubmission
cheap). It has no hooks and no step decoder.

vLLM's ``LLM`` is not thread-safe and batches best when it gets many prompts at once, so concurrent
callers go through :class:`Coalescer`: calls arriving together become one ``generate`` call.
vllm is imported only when this backend is chosen; without the extra the registry says which
``pip install`` fixes it.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Literal
from urllib.parse import parse_qs

import tamperbench
from tamperbench.errors import UserError
from tamperbench.models.openai_compat import Completion
from tamperbench.models.protocols import Generation, GenerationProgress, ProgressListener
from tamperbench.models.provenance import ModelProvenance


class Coalescer:
    """Run ``fn(list_of_requests) -> list_of_results`` on batches of concurrent ``submit`` calls."""

    def __init__(self, fn: Callable[[list], list], max_batch: int = 256):
        self.fn, self.max_batch = fn, max_batch
        self._lock = threading.Lock()
        self._pending: list[tuple[Any, Future]] = []  # (request, future)
        self._running = threading.Lock()

    def submit(self, request) -> Any:
        fut: Future = Future()
        with self._lock:
            self._pending.append((request, fut))
        with self._running:  # whoever holds it drains everything queued so far, in batches
            while True:
                with self._lock:
                    batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
                if not batch:
                    break
                try:
                    for (_, f), res in zip(batch, self.fn([r for r, _ in batch])):
                        f.set_result(res)
                except Exception as err:  # noqa: BLE001 - every caller in the batch sees the error
                    for _, f in batch:
                        if not f.done():
                            f.set_exception(err)
                if fut.done():
                    break
        return fut.result()


def _opts(spec: str) -> tuple[str, dict]:
    body = spec.removeprefix("vllm:")
    model, _, query = body.partition("?")
    if not model:
        raise UserError(f"model '{spec}': expected vllm:<model path or hub id>[?option=value]")
    opts = {k: v[-1] for k, v in parse_qs(query).items()}
    allowed = {"gpu_memory_utilization": float, "max_model_len": int, "tensor_parallel_size": int}
    out = {}
    for k, v in opts.items():
        if k not in allowed:
            raise UserError(f"model '{spec}': unknown option '{k}' (known: {', '.join(sorted(allowed))})")
        try:
            out[k] = allowed[k](v)
        except ValueError:
            raise UserError(f"model '{spec}': option '{k}' must be a {allowed[k].__name__}") from None
    return model, out


class VLLMBackend:
    def __init__(self, spec: str, *, dtype: str | None = None, batch_size: int | None = None,
                 chat_template: str | None = None):
        import torch
        import vllm

        if not torch.cuda.is_available():
            raise UserError(f"model '{spec}': the vllm backend needs a CUDA GPU and torch sees none")
        model, opts = _opts(spec)
        self.llm = vllm.LLM(model=model, dtype=dtype or "auto", enable_prefix_caching=True, enforce_eager=True, **opts)
        self.tokenizer = self.llm.get_tokenizer()
        self._sampling = vllm.SamplingParams
        cfg = self.llm.llm_engine.model_config
        self.max_context = int(cfg.max_model_len)
        self.max_batch_size = batch_size or 256
        eos = self.tokenizer.eos_token_id
        self.eos_ids = [int(eos)] if eos is not None else []
        self._gen = Coalescer(self._generate_batch, self.max_batch_size)
        self.provenance = ModelProvenance(
            source=spec, kind="vllm", resolved_path=model,
            sha256=hashlib.sha256(f"{model}@{getattr(cfg, 'revision', None)}".encode()).hexdigest(),
            revision=getattr(cfg, "revision", None), architecture=(cfg.hf_config.architectures or ["?"])[0],
            dtype=str(cfg.dtype).removeprefix("torch."), device="cuda", torch_version=torch.__version__,
            transformers_version=None, quantization=f"vllm {vllm.__version__}, quantization={cfg.quantization}",
            tamperbench_version=tamperbench.__version__, chat_template="model" if chat_template is None else chat_template)

    @classmethod
    def from_spec(cls, spec: str, *, device: str = "auto", dtype: str | None = None, batch_size: int | None = None,
                  chat_template: str | None = None) -> "VLLMBackend":
        if device not in ("auto", "cuda"):
            raise UserError(f"--device: the vllm backend runs on cuda, got {device}")
        return cls(spec, dtype=dtype, batch_size=batch_size, chat_template=chat_template)

    @property
    def provenance_id(self) -> str:
        return self.provenance.id

    # ---------------------------------------------------------------- shared batch path
    def _generate_batch(self, requests: list[tuple[list[int], object]]) -> list:
        outs = self.llm.generate([{"prompt_token_ids": ids} for ids, _ in requests], [sp for _, sp in requests],
                                 use_tqdm=False)
        return outs

    def chat_ids(self, messages: Sequence[dict], *, system: str | None = None, template_kwargs: dict | None = None) -> list[int]:
        msgs = ([{"role": "system", "content": system}] if system is not None else []) + [dict(m) for m in messages]
        out = self.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, **(template_kwargs or {}))
        return list(out["input_ids"] if hasattr(out, "keys") else out)

    def chat_text(self, messages: Sequence[dict], *, system: str | None = None, template_kwargs: dict | None = None) -> str:
        return self.tokenizer.decode(self.chat_ids(messages, system=system, template_kwargs=template_kwargs))

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def generate_chat(self, conversations: Sequence[Sequence[dict]], *, max_new_tokens: int, temperature: float = 0.0,
                      seed: int | Sequence[int] = 0, stop: list[str] | None = None, system: str | None = None,
                      template_kwargs: dict | None = None, progress: ProgressListener | None = None) -> list[Generation]:
        """One batch through the engine; ``progress`` hears once, when it is back. ``seed``: one per
        conversation, or a base seed (conversation i samples with seed + i)."""
        t0 = time.perf_counter()
        reqs = []
        seeds = list(seed) if not isinstance(seed, int) else [seed + i for i in range(len(conversations))]
        if len(seeds) != len(conversations):
            raise ValueError(f"{len(seeds)} seeds for {len(conversations)} conversations")
        for conv, row_seed in zip(conversations, seeds):
            ids = self.chat_ids(conv, system=system, template_kwargs=template_kwargs)
            reqs.append((ids, self._sampling(temperature=temperature, max_tokens=max_new_tokens, seed=row_seed,
                                             stop=stop or None)))
        outs = self._generate_batch(reqs)
        gens = []
        for (ids, _), out in zip(reqs, outs):
            o = out.outputs[0]
            reason: Literal["eos", "length", "stop"] = (
                "length" if o.finish_reason == "length" else ("stop" if o.stop_reason is not None else "eos"))
            gens.append(Generation(text=o.text, token_ids=list(o.token_ids), prompt_text=self.decode(ids, skip_special_tokens=False),
                                   prompt_ids=ids, finish_reason=reason))
        if progress:
            progress(GenerationProgress(len(gens), len(gens), sum(len(g.token_ids) for g in gens), time.perf_counter() - t0))
        return gens

    def complete(self, prompt_ids: Sequence[int], *, max_tokens: int, top: int = 20, echo: bool = False,
                 needed_by: str = "black-box Sleight of Word") -> Completion:
        sp = self._sampling(temperature=0.0, max_tokens=max_tokens, logprobs=top, prompt_logprobs=top if echo else None)
        out = self._gen.submit((list(prompt_ids), sp))
        o = out.outputs[0]

        def tops(d):
            return {int(k): float(v.logprob) for k, v in (d or {}).items()}

        lps = [float(d[t].logprob) if d and t in d else math.nan for t, d in zip(o.token_ids, o.logprobs or [])]
        p_lp = p_top = None
        if echo:
            p_top = [None if d is None else tops(d) for d in out.prompt_logprobs]
            p_lp = [None if d is None else float(d[t].logprob) for t, d in zip(prompt_ids, out.prompt_logprobs)]
        return Completion(token_ids=list(o.token_ids), logprobs=lps, top=[tops(d) for d in (o.logprobs or [])],
                          finish_reason="stop" if o.finish_reason == "stop" else "length",
                          prompt_logprobs=p_lp, prompt_top=p_top)
