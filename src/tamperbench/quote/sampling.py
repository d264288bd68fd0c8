"""``quote run --sampling greedy|paper``: how responses are drawn, named in the spec and every table.

WHY: the Exact Words paper ran each of its 74 prompts once per model on Kaggle Benchmarks (13 models,
962 responses) at each provider's default temperature, which it does not state; tamperbench decodes
greedily by default. ``paper`` samples instead, one sample per prompt as the paper did
(``PAPER_REPEATS``), at ``PAPER_TEMPERATURE`` (1.0, the OpenAI, Anthropic and Gemini APIs' default),
both written into the run spec. ``--repeats N`` draws more, and the tables then report the spread of
the faithful rate over the repeats, which one sample per prompt cannot show (the paper saw 1-4 points
between its runs); the tables name what the spread counts as faithful.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Literal

Sampling = Literal["greedy", "paper"]
PAPER_TEMPERATURE = 1.0
PAPER_REPEATS = 1  # the paper: one complete 962-call run, one sample per prompt


def resolve(data: object) -> object:
    """Spec values with ``sampling="paper"``'s temperature and repeats filled in where not given."""
    if isinstance(data, dict) and data.get("sampling") == "paper":
        data = {**data}
        if data.get("temperature") is None:
            data["temperature"] = PAPER_TEMPERATURE
        if data.get("repeats") is None:
            data["repeats"] = PAPER_REPEATS
    elif isinstance(data, dict):
        data = {k: v for k, v in data.items() if not (k in ("temperature", "repeats") and v is None)}
    return data


def describe(sampling: str | None, temperature: float, repeats: int) -> str:
    """One phrase for the tables: what drew these responses."""
    if sampling == "paper":
        return f"paper sampling: temperature {temperature:g}, {repeats} repeat(s) per item and arm"
    if temperature == 0:
        return "greedy (one response per item and arm)"
    return f"sampled: temperature {temperature:g}, {repeats} repeat(s) per item and arm"


def spread(rows: list[dict], faithful, verdict_class=None) -> dict:
    """The faithful rate per repeat and its spread (range, standard deviation), and how many items
    changed verdict class between repeats; ``faithful(row) -> bool`` decides what counts and
    ``verdict_class(row) -> str`` what a class is (default: our class and sub-label)."""
    per_repeat: dict[int, list[bool]] = defaultdict(list)
    per_item: dict[tuple, set[str]] = defaultdict(set)
    for r in rows:
        per_repeat[r.get("repeat", 0)].append(faithful(r))
        per_item[(r.get("item_id"), r.get("arm"))].add(
            verdict_class(r) if verdict_class else f"{r['category']}/{r.get('sub_label') or '-'}")
    rates = [sum(v) / len(v) for _, v in sorted(per_repeat.items())]
    several = len(rates) > 1
    return {"repeats": len(rates), "repeat_rates": rates,
            "repeat_spread": (max(rates) - min(rates)) if several else None,
            "repeat_sd": statistics.stdev(rates) if several else None,
            "items_changing": sum(len(v) > 1 for v in per_item.values()) if several else None,
            "items": len(per_item)}
