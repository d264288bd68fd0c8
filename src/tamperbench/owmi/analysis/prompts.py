"""Anchor prompts: a deterministic, seeded pool of short task questions with stable ids.

Why own prompts: the anchors need ~100 distinct items (the source's probe used 96, its known
positive 500 directions over an item pool) and the built-in OWMI item set has nine. These are
templated questions in the three built-in domains (arithmetic, knowledge, commonsense), written
for this project; the same (seed, n) always gives the same ids and texts, recorded in the anchor
outputs so every number can be rerun.
"""

from __future__ import annotations

import random

_KNOWLEDGE = ["What is the capital of {c}?", "Which continent is {c} in?", "What language is spoken in {c}?",
              "Name a famous river in {c}."]
_COUNTRIES = ["France", "Japan", "Brazil", "Kenya", "Canada", "Italy", "Egypt", "India", "Mexico", "Norway",
              "Peru", "Spain", "Chile", "Greece", "Ghana", "Vietnam"]
_COMMON = ["You spill {x} on the floor. What should you do?", "Where would you usually find {x}?",
           "Is {x} heavier than a feather?", "What is {x} usually used for?"]
_THINGS = ["a cup of water", "a hammer", "a blanket", "a bicycle", "a pencil", "a bag of rice", "a candle",
           "a ladder", "a spoon", "a backpack", "a towel", "a kettle"]


def anchor_prompts(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (item_id, question) pairs, domains interleaved, ids ``anchor-<seed>-<k>``."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
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
        out.append((f"anchor-{seed}-{len(out)}", q))
    return out
