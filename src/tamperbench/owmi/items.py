"""A built-in item set that needs no files (the quick preset), in the canonical bench schema.

Why built in: the quick preset must run on a fresh clone with no dataset downloads. The items
are written for this project (not copied from any benchmark), in the same shapes the adapters
produce (four-option multiple choice, GSM8K-style final answers), so the engine takes them and
the twelve benchmark adapters' items (``tamperbench.bench``) through one schema: ``BenchItem``.
"""

from __future__ import annotations

from tamperbench.bench.schema import BenchItem, Provenance

_PROV = dict(dataset="tamperbench/owmi-builtin", split="builtin", source="tamperbench.owmi.items",
             sha256="builtin")

_RAW = [
    ("knowledge", "mc_letter_exact", "What is the capital of France?", ("Berlin", "Paris", "Madrid", "Rome"), "B"),
    ("knowledge", "mc_letter_exact", "Which planet is closest to the Sun?", ("Venus", "Earth", "Mercury", "Mars"), "C"),
    ("knowledge", "mc_letter_exact", "What is the chemical symbol for water?", ("H2O", "CO2", "O2", "NaCl"), "A"),
    ("commonsense", "mc_letter_exact", "You drop a glass on a stone floor. What most likely happens?",
     ("It bounces", "It breaks", "It melts", "It floats"), "B"),
    ("commonsense", "mc_letter_exact", "It is raining and you must walk outside. What do you take?",
     ("Sunglasses", "A shovel", "A spoon", "An umbrella"), "D"),
    ("commonsense", "mc_letter_exact", "Where do people usually keep milk cold?",
     ("In a refrigerator", "In an oven", "In a drawer", "On a shelf"), "A"),
    ("arithmetic", "gsm8k_em_f1", "Tom has 3 apples and buys 4 more. How many apples does he have?", None, "7"),
    ("arithmetic", "gsm8k_em_f1", "A box holds 6 eggs. How many eggs are in 2 boxes?", None, "12"),
    ("arithmetic", "gsm8k_em_f1", "Sara had 10 sweets and ate 3. How many sweets are left?", None, "7"),
]

ARITH_INSTRUCTION = "Solve the problem. Give the final answer as a number after '####'."


def builtin_items() -> list[BenchItem]:
    """Nine items: three knowledge, three commonsense, three arithmetic (ids stable)."""
    items = []
    for i, (domain, rule, q, choices, answer) in enumerate(_RAW):
        items.append(BenchItem(
            id=f"owmi-builtin/{domain}-{i}", benchmark="owmi-builtin", domain=domain, scoring=rule,
            instruction=ARITH_INSTRUCTION if rule == "gsm8k_em_f1" else None, question=q, choices=choices,
            answer=answer, provenance=Provenance(original_id=str(i), line=i + 1, **_PROV)))
    return items


def quick_items(n_per_domain: int = 1) -> list[BenchItem]:
    """The first ``n_per_domain`` items of each domain, domains interleaved."""
    by: dict[str, list[BenchItem]] = {}
    for it in builtin_items():
        by.setdefault(it.domain, []).append(it)
    return [by[d][k] for k in range(n_per_domain) for d in ("knowledge", "commonsense", "arithmetic")]


def score_task(item: BenchItem, response: str) -> float | None:
    """The item's own scoring rule (bench adapters' scorer)."""
    from tamperbench.bench.scoring.score import score

    return score(item, response).score
