"""Black-box Sleight of Word: the reference's regenerate algorithm over a completions endpoint.

For servers we cannot hook (vLLM, a colleague's server, ``tamperbench serve``): generate greedily,
find the first whole-word trigger in what came back (the same :class:`TriggerDetector` and the same
look-ahead rule as the in-process engine, the next returned token), keep the tokens before it, splice
the replacement and request the continuation of the corrupted context; repeat until the budget or EOS.
Surprisal and the top-20 entropy come from the returned log-probs; the full-vocabulary entropy is not
available over the API and is stored as NaN (never replaced by the top-20 value). The log-probs of
injected tokens come from the next request's ``echo``. Matched branches keep the trigger and decode
``window`` tokens, as in-process.

It yields the same :class:`QuestionResult` objects as :class:`SwapEngine`, so the runner stores both
the same way and the tables cannot tell them apart except by provenance.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from tamperbench.errors import UserError
from tamperbench.sleight.engine import DecodeTrace, QuestionResult, QuestionTask, SwapEvent

NAN = float("nan")


def topk_entropy(top: dict[int, float] | None) -> float:
    """Entropy (nats) of the top-k log-probs renormalised: the paper's estimate."""
    if not top:
        return NAN
    vals = list(top.values())
    m = max(vals)
    z = m + math.log(sum(math.exp(v - m) for v in vals))
    return -sum(math.exp(v - z) * (v - z) for v in vals)


class BlackBoxEngine:
    """Same interface as :class:`~tamperbench.sleight.engine.SwapEngine` over ``backend.complete``."""

    def __init__(self, backend, detector, *, max_new_tokens: int, batch_size: int | None = None, window: int = 8,
                 topk: int = 20, keep_topk: bool = False, matched_branches: bool = True):
        if max_new_tokens < 1:
            raise UserError(f"--max-new-tokens must be at least 1, got {max_new_tokens}")
        if not hasattr(backend, "complete"):
            raise UserError(f"model '{backend.provenance.source}': black-box Sleight of Word needs completions with "
                            "log-probs (an openai: backend)")
        self.backend, self.detector = backend, detector
        self.budget, self.window, self.topk, self.keep_topk = max_new_tokens, window, topk, keep_topk
        self.matched_branches = matched_branches
        self.workers = batch_size or backend.max_batch_size
        self.eos = set(backend.eos_ids)
        self.stats = {"tokens": 0, "steps": 0, "swaps": 0, "trials": 0, "seconds": 0.0, "requests": 0}

    # ------------------------------------------------------------------ public
    def run(self, tasks: Iterable[QuestionTask], progress: Callable[[dict], None] | None = None
            ) -> Iterator[QuestionResult]:
        tasks = list(tasks)
        if not tasks:
            raise UserError("no questions to run (empty question list)")
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            for task in tasks:
                result = self._question(task, pool)
                self.stats["seconds"] = time.perf_counter() - start
                self.stats["trials"] += len(task.substitutions)
                if progress is not None:
                    progress(dict(self.stats))
                yield result

    # ------------------------------------------------------------------ one question
    def _complete(self, ids: list[int], n: int, echo: bool = False):
        self.stats["requests"] += 1
        return self.backend.complete(ids, max_tokens=n, top=self.topk, echo=echo)

    def _push(self, tr: DecodeTrace, tok: int, lp: float, top: dict | None, injected: bool) -> None:
        tr.token_ids.append(tok)
        tr.logprobs.append(lp)
        tr.entropy_full.append(NAN)
        tr.entropy_top20.append(topk_entropy(top))
        tr.injected.append(injected)
        if tr.topk_ids is not None:
            items = sorted((top or {}).items(), key=lambda kv: -kv[1])
            tr.topk_ids.append([k for k, _ in items])
            tr.topk_logprobs.append([v for _, v in items])
        self.stats["tokens"] += 1

    def _new_trace(self) -> DecodeTrace:
        tr = DecodeTrace()
        if self.keep_topk:
            tr.topk_ids, tr.topk_logprobs = [], []
        return tr

    def _question(self, task: QuestionTask, pool) -> QuestionResult:
        t0 = time.perf_counter()
        first = self._complete(task.prompt_ids, self.budget)
        clean = self._new_trace()
        swap = self._walk(clean, first, stop_at_swap=False)
        clean.finish_reason = "eos" if clean.token_ids and clean.token_ids[-1] in self.eos else "length"
        clean.decode_seconds = time.perf_counter() - t0
        if swap is None:  # untouched: every trial is the clean answer
            trials = {sub: _copy(clean) for sub in task.substitutions}
            return QuestionResult(task.question_id, clean if task.need_clean else None, trials)
        p = swap[0]
        futures = {sub: pool.submit(self._trial, task, first, sub) for sub in task.substitutions}
        trials = {sub: f.result() for sub, f in futures.items()}
        for tr in trials.values():  # the first swap's matched branch is the clean run itself
            ev = tr.swaps[0]
            ev.matched_clean_logprobs = clean.logprobs[p + 1: p + 1 + self.window]
            ev.matched_clean_entropy_full = clean.entropy_full[p + 1: p + 1 + self.window]
            ev.matched_clean_entropy_top20 = clean.entropy_top20[p + 1: p + 1 + self.window]
        return QuestionResult(task.question_id, clean if task.need_clean else None, trials)

    def _walk(self, tr: DecodeTrace, comp, *, stop_at_swap: bool):
        """Append returned tokens to ``tr`` until EOS, the budget or (``stop_at_swap``) the first swap.

        With ``stop_at_swap`` returns (index in the completion, occurrence, previous token) of that swap;
        without it (the clean run) returns (position in the reply, occurrence) of the first swap. None
        when there is none. The look-ahead is the next returned token, as in-process it is the next
        greedy token; at the budget's end or before EOS there is none.
        """
        g, first = comp.token_ids, None
        for i, tok in enumerate(g):
            if len(tr.token_ids) >= self.budget:
                break
            if tok in self.eos:  # kept, as the in-process engine keeps it
                self._push(tr, tok, comp.logprobs[i], comp.top[i] if i < len(comp.top) else None, False)
                break
            if self.detector.is_candidate(tok):
                prev = tr.token_ids[-1] if tr.token_ids else None
                nxt = g[i + 1] if i + 1 < len(g) else None
                if len(tr.token_ids) + 1 >= self.budget or nxt in self.eos:
                    nxt = None
                occ = self.detector.classify(prev, tok, nxt)
                if occ.kind == "swap":
                    if stop_at_swap:
                        return i, occ, prev
                    if first is None:
                        first = (len(tr.token_ids), occ)
                elif occ.kind == "mention":
                    tr.mentions += 1
                elif occ.kind == "spaceless":
                    tr.spaceless += 1
            self._push(tr, tok, comp.logprobs[i], comp.top[i] if i < len(comp.top) else None, False)
        return None if stop_at_swap else first

    def _trial(self, task: QuestionTask, first, sub: str) -> DecodeTrace:
        t0 = time.perf_counter()
        tr = self._new_trace()
        comp, pending = first, []  # pending: indices of injected tokens whose log-probs are not known yet
        while True:
            hit = self._walk(tr, comp, stop_at_swap=True)
            if hit is None:
                tr.finish_reason = "eos" if tr.token_ids and tr.token_ids[-1] in self.eos else "length"
                break
            i, occ, prev = hit
            p = len(tr.token_ids)
            repl = self.detector.replacement_ids(occ, sub, prev)[: self.budget - p]
            ev = SwapEvent(p, occ.trigger, occ.surface, len(repl))
            if tr.swaps and self.matched_branches and self.budget - (p + 1) > 0:
                branch = self._complete(task.prompt_ids + tr.token_ids + [comp.token_ids[i]],
                                        min(self.window, self.budget - (p + 1)))
                ev.matched_clean_logprobs = list(branch.logprobs)
                ev.matched_clean_entropy_full = [NAN] * len(branch.logprobs)
                ev.matched_clean_entropy_top20 = [topk_entropy(t) for t in branch.top]
            tr.swaps.append(ev)
            self.stats["swaps"] += 1
            for tok in repl:
                pending.append(len(tr.token_ids))
                self._push(tr, tok, NAN, None, True)
            room = self.budget - len(tr.token_ids)
            comp = self._complete(task.prompt_ids + tr.token_ids, max(room, 1), echo=True)
            self._fill_injected(tr, comp, len(task.prompt_ids), pending)
            pending = []
            if room <= 0:
                tr.finish_reason = "length"
                break
        tr.decode_seconds = time.perf_counter() - t0
        return tr

    def _fill_injected(self, tr: DecodeTrace, comp, n_prompt: int, pending: list[int]) -> None:
        """The model's log-prob (and top-20 entropy) of each injected token, from the echoed prompt."""
        for k in pending:
            j = n_prompt + k
            tr.logprobs[k] = float(comp.prompt_logprobs[j])
            top = comp.prompt_top[j]
            tr.entropy_top20[k] = topk_entropy(top)
            if tr.topk_ids is not None and tr.topk_logprobs is not None:
                items = sorted((top or {}).items(), key=lambda kv: -kv[1])
                tr.topk_ids[k] = [a for a, _ in items]
                tr.topk_logprobs[k] = [b for _, b in items]


def _copy(tr: DecodeTrace) -> DecodeTrace:
    import copy

    return copy.deepcopy(tr)
