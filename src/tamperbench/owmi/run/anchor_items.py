"""Anchor prompts: a deterministic, seeded pool of short task questions with stable ids, and the
``anchor`` benchmark that puts them through ``owmi run``.

Why own prompts: the anchors need ~100 distinct items (the source's probe used 96, its known
positive 500 directions over an item pool) and the built-in OWMI item set has nine. These are
templated questions in the three built-in domains (arithmetic, knowledge, commonsense), written
for this project; the same (seed, n) always gives the same ids and texts, recorded in the anchor
outputs so every number can be rerun.

The ``anchor`` benchmark (``benchmarks: ["anchor"]`` in an OWMI spec) is the pool drawn with
:data:`ANCHOR_BENCHMARK_SEED`; the known positive trains on the pool of its own ``item_seed`` (1 by
default), so ids never coincide. Texts can: the knowledge and commonsense templates have 64 and 48
fillings, and a 400-prompt training pool holds them all; only arithmetic questions are new text.
As in the source, the held-out axis of the known positive is the direction, not the prompt
(``owmi known-positive --check`` counts and prints the shared texts). The questions carry no gold
answer: Track A never reads a task answer.
"""

from __future__ import annotations

import random

from tamperbench.tasks.schema import BenchItem, Domain, Provenance

ANCHOR_BENCHMARK = "anchor"
ANCHOR_BENCHMARK_SEED = 2

_KNOWLEDGE = ["What is the capital of {c}?", "Which continent is {c} in?", "What language is spoken in {c}?",
              "Name a famous river in {c}."]
_COUNTRIES = ["France", "Japan", "Brazil", "Kenya", "Canada", "Italy", "Egypt", "India", "Mexico", "Norway",
              "Peru", "Spain", "Chile", "Greece", "Ghana", "Vietnam"]
_COMMON = ["You spill {x} on the floor. What should you do?", "Where would you usually find {x}?",
           "Is {x} heavier than a feather?", "What is {x} usually used for?"]
_THINGS = ["a cup of water", "a hammer", "a blanket", "a bicycle", "a pencil", "a bag of rice", "a candle",
           "a ladder", "a spoon", "a backpack", "a towel", "a kettle"]
_DOMAINS: tuple[Domain, ...] = ("arithmetic", "knowledge", "commonsense")


def _draw(n: int, seed: int) -> list[tuple[str, str, Domain]]:
    rng = random.Random(seed)
    out: list[tuple[str, str, Domain]] = []
    seen: set[str] = set()
    k = 0
    while len(out) < n:
        dom = k % 3
        if dom == 0:
            a, b = rng.randint(2, 99), rng.randint(2, 99)
            q = rng.choice(["What is {a} plus {b}?", "What is {a} times {b}?", "What is {a} minus {b}?"]).format(a=a, b=b)
        elif dom == 1:
            q = rng.choice(_KNOWLEDGE).format(c=rng.choice(_COUNTRIES))
        else:
            q = rng.choice(_COMMON).format(x=rng.choice(_THINGS))
        k += 1
        if q in seen:
            continue
        seen.add(q)
        out.append((f"anchor-{seed}-{len(out)}", q, _DOMAINS[dom]))
    return out


def anchor_prompts(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (item_id, question) pairs, domains interleaved, ids ``anchor-<seed>-<k>``."""
    return [(i, q) for i, q, _ in _draw(n, seed)]


def anchor_items(n: int, seed: int = ANCHOR_BENCHMARK_SEED) -> list[BenchItem]:
    """The first ``n`` anchor prompts of ``seed`` as benchmark items (the ``anchor`` benchmark)."""
    prov = dict(dataset="tamperbench/owmi-anchor", split=f"seed-{seed}", source="tamperbench.owmi.anchor_items",
                sha256="builtin")
    return [BenchItem(id=f"{ANCHOR_BENCHMARK}/{i}", benchmark=ANCHOR_BENCHMARK, domain=dom, scoring="gsm8k_em_f1",
                      question=q, answer=None, provenance=Provenance(original_id=i, line=k + 1, **prov))
            for k, (i, q, dom) in enumerate(_draw(n, seed))]
