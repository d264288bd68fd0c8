"""The items a spec runs (:func:`spec_items`, loaded once per spec), and the built-in item set that
needs no files (the quick preset), in the canonical bench schema.

Why built in: the quick preset must run on a fresh clone with no dataset downloads. The items
are written for this project (not copied from any benchmark), in the same shapes the adapters
produce (short answers scored by exact match / token F1), so the engine takes them and
the twelve benchmark adapters' items (``tamperbench.tasks``) through one schema: ``BenchItem``.
"""

from __future__ import annotations

from functools import lru_cache

from tamperbench.errors import UserError
from tamperbench.tasks.schema import BenchItem, Domain, Provenance, ScoringRule

_PROV = dict(dataset="tamperbench/owmi-builtin", split="builtin", source="tamperbench.owmi.items",
             sha256="builtin")

# Short answers, scored by token F1 / exact match against the gold answer (``gsm8k_em_f1``: SQuAD-style
# normalisation; the whole reply is read when it has no '####'). Why not four-option letters: the embedded
# model answers "A." to every multiple-choice item ("A. Paris" for a B gold), so its baseline task score was
# 0 on every quick-preset item, sham included, and Eq. 20's task damage could not show. Answered in words,
# it scores above 0 at baseline ("The capital of France is Paris." -> F1 0.33; "3 + 4 = 7" -> 0.5), and an
# intervention that damages the answer lowers that score.
_RAW: list[tuple[Domain, ScoringRule, str, tuple[str, ...] | None, str]] = [
    ("knowledge", "gsm8k_em_f1", "What is the capital of France?", None, "Paris"),
    ("knowledge", "gsm8k_em_f1", "Which planet is closest to the Sun?", None, "Mercury"),
    ("knowledge", "gsm8k_em_f1", "What is the chemical symbol for water?", None, "H2O"),
    ("commonsense", "gsm8k_em_f1", "You drop a glass on a stone floor. Does it break or bounce?", None, "break"),
    ("commonsense", "gsm8k_em_f1", "It is raining and you must walk outside. What do you take?", None, "umbrella"),
    ("commonsense", "gsm8k_em_f1", "Where do people usually keep milk cold?", None, "refrigerator"),
    ("arithmetic", "gsm8k_em_f1", "What is 3 + 4?", None, "7"),
    ("arithmetic", "gsm8k_em_f1", "What is 2 times 6?", None, "12"),
    ("arithmetic", "gsm8k_em_f1", "What is 10 minus 3?", None, "7"),
]

WORD_INSTRUCTION = "Answer with one word."
ARITH_INSTRUCTION = "Answer with a number."


def builtin_items() -> list[BenchItem]:
    """Nine items: three knowledge, three commonsense, three arithmetic (ids stable)."""
    items = []
    for i, (domain, rule, q, choices, answer) in enumerate(_RAW):
        items.append(BenchItem(
            id=f"owmi-builtin/{domain}-{i}", benchmark="owmi-builtin", domain=domain, scoring=rule,
            instruction=None, question=f"{q} {ARITH_INSTRUCTION if domain == 'arithmetic' else WORD_INSTRUCTION}",
            choices=choices,
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
    from tamperbench.tasks.scoring.score import score

    return score(item, response).score


def load_items(benchmark: str, n: int) -> list[BenchItem]:
    """The first ``n`` items of ``benchmark``: the built-in set, the probe anchor's, or a task adapter's."""
    if benchmark == "builtin":
        return quick_items(-(-n // 3))[:n]
    from tamperbench.owmi.run.anchor_items import ANCHOR_BENCHMARK, anchor_items

    if benchmark == ANCHOR_BENCHMARK:
        return anchor_items(n)
    from tamperbench.tasks.load import load

    items = load(benchmark, hub=False).items
    if not items:
        raise UserError(f"benchmarks: {benchmark!r} has no items")
    return items[:n]


@lru_cache(maxsize=8)
def spec_items(spec) -> dict[str, list[BenchItem]]:
    """benchmark -> the items ``spec`` runs, loaded once per spec (validation, the plan and the counts
    of stored units read the same lists; callers do not change them)."""
    return {b: load_items(b, spec.items_per_benchmark) for b in spec.benchmarks}
