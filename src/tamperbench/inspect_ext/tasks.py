"""Exact Words as an inspect task: tamperbench's items, both arms, its deterministic scorer.

Each sample is one (item, arm) trial with exactly the single user message ``tamperbench quote run``
sends (:func:`tamperbench.quote.items.build_prompt`), so a greedy model gives the same answer, and
so the same verdict, under either harness (tested against ``tamperbench serve``).
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.solver import generate

from tamperbench.inspect_ext.scorers import exact_words_scorer
from tamperbench.quote.items import build_prompt, load_items

ARMS = ("plain", "strict")


def exact_words_samples(preset: str = "standard", arms: tuple[str, ...] = ARMS,
                        item_ids: list[str] | None = None) -> list[Sample]:
    samples = []
    for item in load_items(preset):
        if item_ids is not None and item.id not in item_ids:
            continue
        for arm in arms:
            samples.append(Sample(id=f"{item.id}/{arm}", input=build_prompt(item, arm), target=item.gold,
                                  metadata={"item_id": item.id, "arm": arm, "preset": preset,
                                            "dirty": item.dirty}))
    return samples


@task
def exact_words(preset: str = "standard", arm: str = "both", items: str | None = None,
                max_tokens: int = 96) -> Task:
    """Exact Words (quote fidelity): quote one sentence of a document verbatim.

    ``arm``: plain, strict or both; ``items``: comma-separated item ids (default: every item of the
    preset); ``max_tokens``: the answer budget (``quote run``'s default, 96). Greedy (temperature 0).
    """
    arms = ARMS if arm == "both" else (arm,)
    if any(a not in ARMS for a in arms):
        raise ValueError(f"arm must be plain, strict or both, not {arm!r}")
    ids = [i.strip() for i in items.split(",")] if items else None
    return Task(dataset=MemoryDataset(exact_words_samples(preset, arms, ids), name=f"exact_words_{preset}"),
                solver=generate(), scorer=exact_words_scorer(preset),
                config=GenerateConfig(temperature=0.0, max_tokens=max_tokens))
