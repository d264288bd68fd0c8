"""The transformers backend: one object that every suite talks to.

Why one object: the three suites need the same few things from a local model (exact chat-template
token ids, plain batched generation, teacher-forced scoring, a step decoder that can be steered
token by token, and hooks into the modules). Keeping them on one class means provenance and batch
size travel together with the model, so every record can say exactly what produced it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from tamperbench.errors import UserError
from tamperbench.models.memory import choose_batch_size
from tamperbench.models.protocols import Generation, ProgressListener, ensure_fits
from tamperbench.models.templating import MISSING_TEMPLATE_HINT, ChatTemplate, raw_prompt
from tamperbench.models.decoding.decoder import StepDecoder

__all__ = ["Generation", "HFBackend", "choose_batch_size"]


class HFBackend:
    """A loaded transformers causal LM plus its tokenizer and provenance."""

    grammar_decoding = True  # generate_chat(grammar=...) decodes under a JSON schema (decoding/grammar.py)

    def __init__(self, model, tokenizer, provenance, *, device: torch.device, max_batch_size: int,
                 chat_template: ChatTemplate | None = None):
        if max_batch_size < 1:
            raise UserError(f"--batch-size must be a positive integer, got {max_batch_size}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.provenance = provenance
        self.template = chat_template or ChatTemplate("model")
        self.device = torch.device(device)
        self.max_batch_size = int(max_batch_size)
        self.eos_ids = _eos_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_ids[0])
        self._prefix_store: Any = None  # a PrefixStore inside prefix_memory()
        self._rows_from_memory = False  # True inside rows_from_memory(): run_generation sizes rows by memory

    @property
    def provenance_id(self) -> str:
        return self.provenance.id

    @property
    def max_context(self) -> int:
        """The model's context length in tokens (config's max_position_embeddings)."""
        return int(getattr(self.model.config, "max_position_embeddings", None) or 0)

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def encode(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer.encode(text, add_special_tokens=False)]

    # ---------------------------------------------------------------- templating
    def _messages(self, messages: Sequence[dict], system: str | None) -> list[dict]:
        msgs = [dict(m) for m in messages]
        for i, m in enumerate(msgs):
            if m.get("role") not in ("user", "assistant", "system") or not isinstance(m.get("content"), str):
                raise UserError(f"message {i} needs role user|assistant|system and a string content, got {m!r}")
        if system is not None:
            if msgs and msgs[0]["role"] == "system":
                raise UserError("both a system= argument and a system message were given; pass only one")
            msgs = [{"role": "system", "content": system}, *msgs]
        return msgs

    def _template_kwargs(self, template_kwargs: dict | None) -> dict:
        kw = dict(template_kwargs or {})
        if self.template.mode == "file":
            kw["chat_template"] = self.template.text
        elif getattr(self.tokenizer, "chat_template", None) is None:
            raise UserError(f"model '{self.provenance.source}' has no chat template; {MISSING_TEMPLATE_HINT}")
        return kw

    def chat_text(self, messages: Sequence[dict], *, system: str | None = None,
                  template_kwargs: dict | None = None) -> str:
        """The exact prompt text after the chat template (generation prompt appended), or the raw
        prompt under ``--chat-template none``."""
        msgs = self._messages(messages, system)
        if self.template.mode == "none":
            return raw_prompt(msgs)
        return self.tokenizer.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=True, **self._template_kwargs(template_kwargs))

    def chat_ids(self, messages: Sequence[dict], *, system: str | None = None,
                 template_kwargs: dict | None = None) -> list[int]:
        """Token ids of the templated prompt, as a plain list (transformers 5 returns a BatchEncoding).

        Under ``--chat-template none`` the raw prompt is tokenized as a completion prompt, with the
        tokenizer's own special tokens (BOS), as lm-evaluation-harness does for base models."""
        msgs = self._messages(messages, system)
        if self.template.mode == "none":
            return [int(t) for t in self.tokenizer(raw_prompt(msgs), add_special_tokens=True)["input_ids"]]
        out = self.tokenizer.apply_chat_template(
            msgs, tokenize=True, add_generation_prompt=True, **self._template_kwargs(template_kwargs))
        if hasattr(out, "keys") and "input_ids" in out:
            out = out["input_ids"]
        if isinstance(out, torch.Tensor):
            out = out.tolist()
        if out and isinstance(out[0], list):
            out = out[0]
        return [int(t) for t in out]

    # ---------------------------------------------------------------- decoding
    def step_decoder(self, *, topk: int = 20, capacity: int | None = None) -> StepDecoder:
        """A fresh batched step decoder over this model (see models/decoding/decoder.py)."""
        return StepDecoder(self.model, eos_ids=self.eos_ids, topk=topk, device=self.device,
                           capacity=capacity or self.max_batch_size, max_context=self.max_context)

    def generate_chat(self, conversations: Sequence[Sequence[dict]], *, max_new_tokens: int,
                      temperature: float = 0.0, seed: int | Sequence[int] = 0, stop: list[str] | None = None,
                      system: str | None = None, template_kwargs: dict | None = None,
                      progress: ProgressListener | None = None, share_prefix: bool = True,
                      grammar=None) -> list[Generation]:
        """Batched generation for many conversations; greedy when temperature == 0.

        ``progress``: called with a ``GenerationProgress`` after every decoding step (nothing is drawn here).
        ``share_prefix``: prompts that share a token prefix (a document, a system prompt) prefill
        it once (models/prefix_share.py); False prefills every prompt alone (the benchmarks' baseline).

        Sampling draws each conversation's tokens from its own generator, seeded with ``seed[i]`` when
        ``seed`` is a sequence (one per conversation), else with (seed, conversation index), so a
        sampled answer does not depend on the batch size or on which other conversations share its batch.

        ``grammar``: a ``decoding.grammar.JsonGrammar`` every answer is decoded under (a token
        bitmask each step, EOS once the JSON is complete), or a list of them (None: free), one per
        conversation.
        """
        if max_new_tokens < 1:
            raise UserError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        if temperature < 0:
            raise UserError(f"temperature must be >= 0, got {temperature}")
        stops = [s for s in (stop or []) if s]
        prompts = [self.chat_ids(c, system=system, template_kwargs=template_kwargs) for c in conversations]
        for i, p in enumerate(prompts):  # every conversation first: refuse before any compute
            ensure_fits(len(p), max_new_tokens, self.max_context, f"conversation {i}")
        texts = [self.chat_text(c, system=system, template_kwargs=template_kwargs) for c in conversations]
        from tamperbench.models.generate import run_generation

        grammars = None if grammar is None else (list(grammar) if isinstance(grammar, (list, tuple))
                                                 else [grammar] * len(conversations))
        if grammars is not None and len(grammars) != len(conversations):
            raise ValueError(f"{len(grammars)} grammars for {len(conversations)} conversations")

        outs = run_generation(self, prompts, max_new_tokens=max_new_tokens, temperature=temperature,
                              seed=seed, stops=stops, progress=progress, share_prefix=share_prefix,
                              prefix_store=getattr(self, "_prefix_store", None) if share_prefix else None,
                              grammars=grammars)
        return [Generation(text=text, token_ids=ids, prompt_text=pt, prompt_ids=pi, finish_reason=fr)  # type: ignore[arg-type]
                for (ids, text, fr), pt, pi in zip(outs, texts, prompts)]

    @contextmanager
    def prefix_memory(self, fraction: float = 0.1) -> Iterator[Any]:
        """Inside the block, generation calls keep their rows' prompt + answer KV (up to ``fraction``
        of free memory) and later calls start from it (models/prefix_share.py, PrefixStore): a
        judge's retry re-reads its first conversation. Keep hooks and weights unchanged inside."""
        from tamperbench.models.memory import free_bytes
        from tamperbench.models.prefix_share import PrefixStore

        prev, self._prefix_store = self._prefix_store, PrefixStore(int(free_bytes(self.device) * fraction))
        try:
            yield self._prefix_store
        finally:
            self._prefix_store = prev

    @contextmanager
    def rows_from_memory(self) -> Iterator[None]:
        """The ``MemoryRowsBackend`` capability (models/protocols.py): inside the block a generation call
        decodes as many of its prompts at once as memory allows (models/memory.py), not at most the
        load-time batch size.

        Why: that batch size (64 on CPU unless ``--batch-size`` says otherwise) is a guess made before any
        prompt is known, and a call of more prompts than it decoded the rest as a second wave: Exact
        Words' ``standard`` preset (74 prompts) paid about 96 more steps' fixed cost (the weights read
        again) for 16 rows, 10 s of a 60 s run. The quote runner opens this when the user gave no
        ``--batch-size`` (an explicit one is kept as the cap); greedy tokens do not depend on the rows."""
        prev, self._rows_from_memory = self._rows_from_memory, True
        try:
            yield
        finally:
            self._rows_from_memory = prev

    # ---------------------------------------------------------------- scoring
    @torch.inference_mode()
    def score(self, prompt_ids: Sequence[int], continuation_ids: Sequence[int], *,
              chunk_size: int = 128) -> list[float]:
        """Teacher-forced log p(continuation[i] | prompt, continuation[:i]) for every i.

        The prompt and the continuation are streamed through the KV cache in chunks, so memory is
        bounded by chunk_size x vocabulary rather than by the whole length x vocabulary.
        """
        from transformers import DynamicCache

        if not prompt_ids:
            raise UserError("score() needs a non-empty prompt")
        cont = list(continuation_ids)
        if not cont:
            return []
        ids = list(prompt_ids) + cont
        ensure_fits(len(ids), 0, self.max_context, "scored text")
        cache = DynamicCache(config=self.model.config)
        out: list[float] = []
        n_prompt = len(prompt_ids)
        pos = 0
        # feed everything except the last token; logits at position j predict token j+1
        while pos < len(ids) - 1:
            end = min(pos + chunk_size, len(ids) - 1)
            chunk = torch.tensor([ids[pos:end]], device=self.device)
            keep_from = max(n_prompt - 1, pos)  # first position whose prediction we need
            logits = self.model(input_ids=chunk, cache=cache, use_cache=True,
                                logits_to_keep=end - keep_from if end > keep_from else 1).logits[0]
            if end > keep_from:
                logp = torch.log_softmax(logits.float(), dim=-1)
                targets = torch.tensor(ids[keep_from + 1:end + 1], device=self.device)
                out.extend(logp.gather(1, targets[:, None])[:, 0].tolist())
            pos = end
        return out

    @torch.inference_mode()
    def next_token_distributions(self, input_ids: Sequence[int], *, chunk_size: int = 128,
                                 start: int = 0) -> Iterator[tuple[list[int], torch.Tensor]]:
        """Yields (positions, float32 log-probs [len(positions), vocab]) chunk by chunk: row i is
        the model's distribution of the token after ``input_ids[positions[i]]``.

        Why a generator: a 4k-token prompt times a 150k vocabulary is 2.4 GB of float32; streamed
        through the KV cache only chunk_size x vocab is alive at once (OWMI's divergence).
        """
        from transformers import DynamicCache

        ids = list(input_ids)
        if not ids:
            raise UserError("next_token_distributions() needs at least one token")
        ensure_fits(len(ids), 0, self.max_context, "scored text")
        cache = DynamicCache(config=self.model.config)
        pos = 0
        while pos < len(ids):
            end = min(pos + chunk_size, len(ids))
            chunk = torch.tensor([ids[pos:end]], device=self.device)
            keep_from = max(start, pos)
            keep = end - keep_from
            logits = self.model(input_ids=chunk, cache=cache, use_cache=True,
                                logits_to_keep=max(keep, 1)).logits[0]
            if keep > 0:
                yield list(range(keep_from, end)), torch.log_softmax(logits[-keep:].float(), dim=-1)
            pos = end

    # ---------------------------------------------------------------- hooks
    @contextmanager
    def hooks(self, hooks: Sequence[tuple[str, Any]]) -> Iterator[None]:
        """Install (site, fn) forward hooks for the duration of the block; always removed."""
        from tamperbench.models.hooks import hooks as _hooks

        with _hooks(self.model, hooks):
            yield

    def capture(self, sites: Sequence[str], input_ids: Sequence[int] | torch.Tensor) -> dict[str, torch.Tensor]:
        """Run one forward pass and return the activations at each abstract site."""
        from tamperbench.models.hooks import capture

        return capture(self.model, sites, input_ids)

    def capturing(self, sites: Sequence[str]):
        """Context manager: site -> list of activations, one per forward pass inside the block."""
        from tamperbench.models.hooks import capturing

        return capturing(self.model, sites)

    def choose_batch_size(self, *, seq_len: int = 1024, cap: int | None = None) -> int:
        return choose_batch_size(self.model, self.device, seq_len=seq_len, cap=cap)


def _eos_ids(model, tokenizer) -> list[int]:
    """All ids that end an answer: the generation config's EOS ids plus the tokenizer's."""
    ids: list[int] = []
    gen = getattr(model, "generation_config", None)
    for src in (getattr(gen, "eos_token_id", None), getattr(model.config, "eos_token_id", None),
                tokenizer.eos_token_id):
        if src is None:
            continue
        for t in (src if isinstance(src, (list, tuple)) else [src]):
            if int(t) not in ids:
                ids.append(int(t))
    if not ids:
        raise UserError("the model and tokenizer define no EOS token id")
    return ids

