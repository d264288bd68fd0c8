"""What an adapter is, and the helpers every adapter uses to build items.

An adapter is data plus one ``convert(row, ctx)`` function: the row is a dict in the dataset's
ORIGINAL published schema (field names exactly as released), the result is a :class:`BenchItem`.
Convert functions raise :class:`~tamperbench.tasks.sources.SchemaError` through ``need``/``bad``,
so a file in the wrong schema gives one line naming the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tamperbench.tasks.schema import LETTERS, BenchItem, Domain, Provenance, ScoringRule
from tamperbench.tasks.sources import RowCtx, bad


@dataclass(frozen=True)
class Adapter:
    name: str
    title: str
    domain: Domain
    scoring: ScoringRule
    hub: tuple[str, str | None, str]  # (dataset, config, split) as loaded with datasets.load_dataset
    original: str  # where the original files come from and which fields they have (shown by `bench list`)
    convert: Callable[[dict[str, Any], RowCtx, "Adapter"], BenchItem]
    fixture: str  # file name under tamperbench/tasks/fixtures
    csv_columns: tuple[str, ...] | None = None  # header-less CSV columns (original MMLU release)
    aliases: tuple[str, ...] = field(default=())

    @property
    def dataset(self) -> str:
        return self.hub[0]


def provenance(adapter: Adapter, ctx: RowCtx, original_id: str, split: str | None = None) -> Provenance:
    return Provenance(
        dataset=adapter.hub[0], config=adapter.hub[1], split=split or adapter.hub[2],
        original_id=str(original_id), source=ctx.path, sha256=ctx.sha256, line=ctx.line,
    )


def item(adapter: Adapter, ctx: RowCtx, original_id: Any, *, split: str | None = None, **fields: Any) -> BenchItem:
    """Build a BenchItem with the adapter's name, domain, scoring rule and the row's provenance."""
    return BenchItem(
        id=f"{adapter.name}/{original_id}", benchmark=adapter.name, domain=adapter.domain,
        scoring=fields.pop("scoring", adapter.scoring), provenance=provenance(adapter, ctx, original_id, split),
        **fields,
    )


def text_field(row: dict[str, Any], ctx: RowCtx, name: str) -> str:
    from tamperbench.tasks.sources import need

    (value,) = need(row, ctx, name)
    if not isinstance(value, str):
        raise bad(ctx, name, f"must be a string, got {type(value).__name__}")
    return value


def string_list(value: Any, ctx: RowCtx, name: str, min_len: int = 2) -> list[str]:
    if hasattr(value, "tolist"):  # numpy arrays from Parquet readers
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise bad(ctx, name, f"must be a list of strings, got {type(value).__name__}")
    if len(value) < min_len:
        raise bad(ctx, name, f"must have at least {min_len} entries, has {len(value)}")
    if len(value) > len(LETTERS):
        raise bad(ctx, name, f"has {len(value)} entries; at most {len(LETTERS)} options are supported")
    return list(value)


def index_field(value: Any, ctx: RowCtx, name: str, n: int, base: int = 0) -> int:
    """An answer index (int or digit string, ``base`` 0 or 1) checked against ``n`` options."""
    try:
        idx = int(str(value).strip()) - base
    except ValueError:
        raise bad(ctx, name, f"must be an integer option index, got {value!r}") from None
    if not 0 <= idx < n:
        raise bad(ctx, name, f"= {value!r} is out of range for {n} options")
    return idx


def letter_field(value: Any, ctx: RowCtx, name: str, n: int) -> int:
    """An answer letter ('A'..) checked against ``n`` options; returns its index."""
    text = str(value).strip().upper()
    if len(text) != 1 or text not in LETTERS[:n]:
        raise bad(ctx, name, f"must be one of {', '.join(LETTERS[:n])}, got {value!r}")
    return LETTERS.index(text)


def seeded_order(key: str, n: int) -> list[int]:
    """A deterministic permutation of range(n), seeded by the item's original id.

    WHY: GPQA and TruthfulQA release the correct answer in a fixed position (GPQA's 'Correct
    Answer' column, TruthfulQA's first MC1 target). Presented in that order a model that always
    says 'A' would score 100%; the permutation is a function of the id alone, so every run and
    every condition (intervention, sham, observer) sees the same order.
    """
    seed = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def mc_fields(choices: Sequence[str], correct: int, *, instruction: str | None = None) -> dict[str, Any]:
    return {"choices": tuple(choices), "answer": LETTERS[correct], "instruction": instruction}
