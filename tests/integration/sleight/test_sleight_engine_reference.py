"""The swap engine against a naive reference on the real embedded model.

The reference is written here, independently of the engine: one trial at a time, no KV cache, the
next token read from a full forward pass over the whole context (and for the look-ahead token), the
same TriggerDetector. The engine's tokens must equal it token for token; where they part, the
reference step must be a near-tie (top-2 log-probs within 1e-4), and that must be rare.

WHY a guide: a causal model's logits at position i of a no-cache forward over a longer sequence are
those of a no-cache forward over its first i + 1 tokens (up to float rounding of the longer matrix
products), so one forward over prompt + the engine's trace answers every step of the reference whose
context is a prefix of it; any other context (a look-ahead past a swapped trigger, or everything after
the reference leaves the trace) gets its own forward. The reference's tokens are what a forward per
token gives; only the number of forwards changes (about 200 -> 20 here, 37 s -> a few).
"""

from __future__ import annotations

from collections import deque

import pytest
import torch

from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.engine import QuestionTask, SwapEngine

pytestmark = pytest.mark.model

BUDGET = 20
TIE = 1e-4
QUESTIONS = {
    "moon": "what causes the phases of the moon?",  # "The phases of the moon ..." -> a swap at token 0
    "week": "how many days are there in a week?",  # "A week is approximately 7 days." -> untouched
    "paris": "what is the capital of France?",
}
SUBS = ["scarf", "Mandela effect"]


def _pick(lp):
    top2 = lp.topk(2).values
    return int(lp.argmax()), float(top2[0] - top2[1]), lp


@torch.inference_mode()
def _next(model, ctx):
    return _pick(torch.log_softmax(model(input_ids=torch.tensor([ctx])).logits[0, -1].float(), -1))


class _Guided:
    """``_next`` over contexts that are mostly prefixes of one sequence: one no-cache forward over the
    sequence serves each prefix; any other context gets its own forward (module docstring)."""

    def __init__(self, model, seq: list[int] | None):
        self.model, self.seq, self.lp = model, list(seq or []), None
        self.forwards = 0

    @torch.inference_mode()
    def __call__(self, ctx: list[int]):
        n = len(ctx)
        if self.seq and n <= len(self.seq) and ctx == self.seq[:n]:
            if self.lp is None:
                self.forwards += 1
                self.lp = torch.log_softmax(self.model(input_ids=torch.tensor([self.seq])).logits[0].float(), -1)
            return _pick(self.lp[n - 1])
        self.forwards += 1
        return _next(self.model, ctx)


def naive_trial(model, det, eos, prompt, sub, budget, guide: list[int] | None = None):
    """Returns (tokens, injected flags, swap positions, top-2 gap at each free step). ``guide``: generated
    tokens to read the prefixes' next tokens from in one forward (the module docstring); the result is
    the reference's either way."""
    step = _Guided(model, prompt + guide if guide else None)
    out, injected, swaps, gaps, queue = [], [], [], [], deque()
    while len(out) < budget:
        if queue:
            out.append(queue.popleft())
            injected.append(True)
            gaps.append(None)
            continue
        tok, gap, _ = step(prompt + out)
        if tok not in eos and sub is not None and det.is_candidate(tok):
            prev = out[-1] if out else None
            nxt = None
            if len(out) + 1 < budget:
                nxt, _, _ = step(prompt + out + [tok])
                nxt = None if nxt in eos else nxt
            occ = det.classify(prev, tok, nxt)
            if occ.kind == "swap":
                repl = det.replacement_ids(occ, sub, prev)[: budget - len(out)]
                swaps.append(len(out))
                queue.extend(repl)
                gaps.append(gap)  # gap of the step that chose the (replaced) trigger
                out.append(queue.popleft())
                injected.append(True)
                continue
        out.append(tok)
        injected.append(False)
        gaps.append(gap)
        if tok in eos:
            break
    return out, injected, swaps, gaps


@pytest.fixture(scope="module")
def engine_results(embedded_backend):
    be = embedded_backend
    det = TriggerDetector(be.tokenizer, ["the"])
    tasks = [QuestionTask(qid, be.chat_ids([{"role": "user", "content": q}]), SUBS, True)
             for qid, q in QUESTIONS.items()]
    eng = SwapEngine(be, det, max_new_tokens=BUDGET, batch_size=4, window=4)
    return det, {r.question_id: r for r in eng.run(tasks)}


def test_engine_equals_naive_reference(embedded_backend, engine_results):
    be = embedded_backend
    det, results = engine_results
    eos = set(be.eos_ids)
    compared = diverged = swaps_seen = 0
    for qid, q in QUESTIONS.items():
        prompt = be.chat_ids([{"role": "user", "content": q}])
        res = results[qid]
        for sub, trace in [(None, res.clean), *res.trials.items()]:
            ref, inj, swaps, gaps = naive_trial(be.model, det, eos, prompt, sub, BUDGET, guide=trace.token_ids)
            compared += 1
            if trace.token_ids != ref:
                i = next(k for k, (a, b) in enumerate(zip(trace.token_ids, ref)) if a != b)
                assert gaps[i] is not None and gaps[i] < TIE, f"{qid}/{sub}: token {i} differs, gap {gaps[i]}"
                diverged += 1
                continue
            assert trace.injected == inj
            if sub is not None:
                assert [s.position for s in trace.swaps] == swaps
                swaps_seen += len(swaps)
    assert swaps_seen >= 4  # the sample really exercises first and later swaps
    assert diverged <= 1, f"{diverged} of {compared} traces diverged at near-ties"


def test_the_guide_changes_no_token_of_the_reference(embedded_backend, engine_results):
    """The guided reference against a forward per token, on one trial with a swap (its look-ahead past the
    swapped trigger takes its own forward), and with a wrong guide: the reference leaves it and still
    gives the forward-per-token tokens."""
    be = embedded_backend
    det, results = engine_results
    eos = set(be.eos_ids)
    prompt = be.chat_ids([{"role": "user", "content": QUESTIONS["moon"]}])
    trace = results["moon"].trials["scarf"].token_ids
    budget = 10
    plain = naive_trial(be.model, det, eos, prompt, "scarf", budget)
    assert plain[2], "the trial swaps within the budget"
    wrong = trace[:3] + [trace[3] + 1] + trace[4:]
    for guide in (trace, wrong):
        got = naive_trial(be.model, det, eos, prompt, "scarf", budget, guide=guide)
        assert got[:3] == plain[:3]  # tokens, injected flags, swap positions
        # the gaps within float rounding of a longer forward's matrix products
        assert [g is None for g in got[3]] == [g is None for g in plain[3]]
        assert [g for g in got[3] if g is not None] == pytest.approx([g for g in plain[3] if g is not None], abs=1e-4)


def test_untouched_question_gives_copies(engine_results):
    _, results = engine_results
    res = results["week"]
    assert all(not t.swaps for t in res.trials.values())
    for t in res.trials.values():
        assert t.token_ids == res.clean.token_ids and t is not res.clean


def test_matched_branch_is_the_unaltered_continuation(embedded_backend, engine_results):
    be = embedded_backend
    _, results = engine_results
    res = results["moon"]
    prompt = be.chat_ids([{"role": "user", "content": QUESTIONS["moon"]}])
    tr = res.trials["scarf"]
    first = tr.swaps[0]
    # first swap: the matched branch is the clean run's own next tokens
    p = first.position
    assert first.matched_clean_logprobs == res.clean.logprobs[p + 1: p + 5]
    # a later swap: the engine forked a branch; replay the unaltered branch with no cache
    ev = tr.swaps[1]
    ctx = prompt + tr.token_ids[: ev.position]
    _, _, lp = _next(be.model, ctx)
    # the swapped-out trigger is the greedy token at that position
    trig = int(lp.argmax())
    assert be.tokenizer.decode([trig]).strip().lower() == "the"
    ctx = ctx + [trig]
    ref_lps = []
    for _ in range(len(ev.matched_clean_logprobs)):
        tok, _, lp = _next(be.model, ctx)
        ref_lps.append(float(lp[tok]))
        ctx.append(tok)
    assert len(ref_lps) == 4
    assert ev.matched_clean_logprobs == pytest.approx(ref_lps, abs=1e-3)
