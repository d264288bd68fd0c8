"""The Exact Words run spec (:class:`QuoteRunSpec`), frozen into the run directory's ``spec.json``, and the
hash of the data it was asked against (``data_sha256``: filled in by the run, so a record says which
version of the items it answered)."""

from __future__ import annotations

import hashlib
from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tamperbench.quote import sampling as sampling_rule
from tamperbench.quote.items import DATA_DIR, load_items
from tamperbench.spec_base import BatchSize, FrozenSpec, NewTokens, Repeats, Seed, Temperature

__all__ = ["QuoteRunSpec", "data_sha256", "with_data_hash"]


class QuoteRunSpec(FrozenSpec):
    """Everything that defines a quote run; frozen into the run directory's spec.json.

    Checked by field constraints and one cross-field validator, so flags and spec files obey the
    same rules before any run directory is created.
    """

    cli_flags: ClassVar[dict[str, str]] = {"arms": "--arm", "item_ids": "--items"}

    suite: Literal["quote"] = "quote"
    model: str = Field(default="embedded", min_length=1)
    preset: Literal["standard", "depth", "colon", "code"] = "standard"
    arms: list[Literal["plain", "strict"]] = Field(default=["plain", "strict"], min_length=1)
    sampling: sampling_rule.Sampling = "greedy"  # paper: sample at the temperature/repeats below (quote/sampling.py)
    repeats: Repeats = 1
    temperature: Temperature = Field(default=0.0, validate_default=True)
    seed: Seed = 0
    max_new_tokens: NewTokens = 96
    device: str = "auto"
    dtype: str | None = None
    batch_size: BatchSize | None = None
    chat_template: str | None = None  # None: the model's own; "none": raw prompt; else a Jinja file
    item_ids: list[str] | None = Field(default=None, min_length=1)  # a subset of the preset's items (None = all)
    data_sha256: str = ""  # hash of the documents + items the run was asked against
    # how a sampled answer is seeded (quote/plan.py ``trial_seed``): "trial" = by the seed and the trial's item,
    # arm and repeat, so a subset (--items) or a machine that cuts the decoding calls otherwise samples the same
    # answers; "position" = by the repeat's seed and the answer's place in its decoding call (runs sampled before
    # this field existed). None when greedy: no sample, nothing to seed.
    sample_seed: Literal["trial", "position"] | None = Field(default="trial", validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _paper_sampling_defaults(cls, data: object) -> object:
        return sampling_rule.resolve(data)

    @field_validator("temperature")
    @classmethod
    def _sampled_repeats(cls, temperature: float, info: ValidationInfo) -> float:
        if info.data.get("sampling") == "paper" and temperature == 0:
            raise ValueError("--sampling paper samples: give a temperature > 0 (default 1.0)")
        if info.data.get("repeats", 1) > 1 and temperature == 0:
            raise ValueError("repeats > 1 needs temperature > 0 (greedy repeats are identical)")
        return temperature

    @field_validator("sample_seed")
    @classmethod
    def _greedy_draws_nothing(cls, sample_seed: str | None, info: ValidationInfo) -> str | None:
        return None if info.data.get("temperature", 0) == 0 else sample_seed

    @classmethod
    def stored_defaults(cls, stored: dict) -> dict:
        """A run sampled before ``sample_seed`` existed seeded by position: it resumes only as such."""
        out = super().stored_defaults(stored)
        if "sample_seed" in out:
            out["sample_seed"] = "position" if float(stored.get("temperature") or 0) > 0 else None
        return out

    @field_validator("item_ids")
    @classmethod
    def _known_items(cls, item_ids: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if item_ids is not None and "preset" in info.data:
            unknown = sorted(set(item_ids) - {it.id for it in load_items(info.data["preset"])})
            if unknown:
                raise ValueError(f"{', '.join(unknown)} not in preset {info.data['preset']!r}")
        return item_ids


def data_sha256() -> str:
    """Hash of every data file, so a record says which version of the items it answered."""
    h = hashlib.sha256()
    for path in sorted([DATA_DIR / "items.json", *DATA_DIR.glob("documents/*.txt")]):
        if path.is_file():
            h.update(path.relative_to(DATA_DIR).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()




def with_data_hash(spec: QuoteRunSpec) -> QuoteRunSpec:
    """``spec`` with ``data_sha256`` of the data files here: a run's records (and keys) name the data."""
    return spec.model_copy(update={"data_sha256": data_sha256()})
