"""The OWMI run spec (frozen) and its expansion into paired runs, plus the presets.

Why one frozen spec: Appendix D requires the run specification to fix model revision, decoding,
item identity, probe text, site, operator, dose, seed, condition and hook scope. The spec is the
run directory's ``spec.json``; resuming with a different spec is refused by the store.

Expansion (Appendix C.1): model x benchmark x object x (operator, dose) is the cell; each cell
runs every item x seed, and each (item, seed) runs every track x probe x scope x condition. The
conditions of one (cell, item, seed, track, probe, scope) share a ``pair_id``.

Items (:func:`spec_items`, loaded once per spec): the benchmarks' items a spec runs, read by the
preflight, the plan and the counts of stored units alike; and the built-in item set that needs no
files (the quick preset). Why built in: the quick preset must run on a fresh clone with no dataset
downloads. The items are written for this project (not copied from any benchmark), in the same
shapes the adapters produce (short answers scored by exact match / token F1), so the engine takes
them and the twelve benchmark adapters' items (``tamperbench.tasks``) through one schema:
``BenchItem``. (They lived in ``run/items.py``, which still imports, with a DeprecationWarning.)
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tamperbench.errors import UserError
from tamperbench.safeio.files import read_capped
from tamperbench.spec_base import MAX_BATCH, SPEC_FILE_MAX_BYTES, NewTokens, Seed, Temperature
from tamperbench.tasks.schema import BenchItem, Domain, Provenance, ScoringRule
from tamperbench.owmi.protocol.design import ObjectSpec, OperatorSpec, check_dose
from tamperbench.owmi.protocol.records import CONDITIONS, TRACKS, Condition, Readout, Scope, Track

MAX_POSITION = 1 << 20  # no model here reads a context of a million tokens; the model's own bound is checked later
Family = Literal["detection", "confidence", "localization", "characterization", "reconstruction"]


class OwmiSpec(BaseModel):
    """Everything that defines an OWMI run. See ``examples/owmi_full.json`` for every axis."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    suite: Literal["owmi"] = "owmi"
    models: tuple[str, ...] = ("embedded",)
    observer_models: tuple[str, ...] = Field(default=(), description="Tier-2 observers: other model specs.")
    observer_classifier: bool = Field(default=True, description="Tier 3: TF-IDF + logistic regression on held-out visible outputs.")
    benchmarks: tuple[str, ...] = ("builtin",)
    items_per_benchmark: int = Field(default=3, ge=1, le=100_000)
    objects: tuple[ObjectSpec, ...] = Field(min_length=1)
    operators: tuple[OperatorSpec, ...] = Field(min_length=1)
    concepts: tuple[str, ...] = Field(default=(), description="Concepts for 'add' directions, cycled over items; empty = all.")
    positions: str = Field(default="task", description="'task' (the task text's tokens), 'last', 'all', or absolute "
                           "token indices '0,1,2' (the known positive's positions, Section 7.2).")
    replace_directions: tuple[Seed, Seed] | None = Field(
        default=None, description="What 'replace' writes. None: the engine's reference, the object's value at the last "
        "token of a neutral sentence (one for every unit). [START, END]: a seeded random unit direction per unit, "
        "scaled to that reference's norm, seed START + item index x len(seeds) + the seed's index "
        "(``direction_seed``): the known positive's held-out directions (Section 7.2).")
    when: Literal["prefill", "every_step"] = "prefill"
    probes: tuple[Family, ...] = ("detection", "confidence", "localization", "characterization", "reconstruction")
    tracks: tuple[Track, ...] = ("A",)
    scopes: tuple[Scope, ...] = ("active", "lifted")
    conditions: tuple[Condition, ...] = CONDITIONS
    seeds: tuple[Seed, ...] = Field(default=(0,), max_length=10_000)
    readout: Readout = Field(
        default="generated", description="How a probe's answer is read (part of every cell and pair key, so read-outs "
        "are never pooled): 'generated' (greedy decoding of the JSON answer, then parsed; the paper's), 'constrained' "
        "(decoded under a grammar built from the probe's JSON schema; needs llguidance), or 'choice' (a token-level "
        "read-out: the JSON prefix is teacher-forced and the probe's closed option set scored by log-probability; "
        "decodes nothing, rows with too little option mass unscorable; not a verbal report).")
    temperature: Temperature = 0.0
    top_p: float = Field(default=1.0, gt=0, le=1)
    task_max_new_tokens: NewTokens = 24
    probe_max_new_tokens: NewTokens = Field(default=128, description="Token budget of a generated probe answer "
                                            "(the paper's 128).")
    reflection_max_new_tokens: NewTokens = 48
    calibration_steps: int = Field(default=10, ge=1, le=10_000)
    track_c_system: Literal["none", "shared"] = Field(
        default="none", description="Track C's system message: 'none' (no system message; the chat template's "
        "default applies), as Track C carries no intervention cue and no introspective question (Section 3.3); "
        "'shared' puts the introspection system prompt of the other tracks in front of it, as runs did before.")
    calibration: Literal["batched", "sequential"] = Field(
        default="batched", description="Impact matching's E[D(eta)]: the cell's units as rows of one ragged forward per "
        "eta ('batched'), or one forward per unit ('sequential', the reference); equal to float rounding, and "
        "each calibration row records which ran.")
    js_chunk: int = Field(default=128, ge=1, le=MAX_BATCH)
    device: str = "auto"
    dtype: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_model(cls, data):
        """``model``: one model under test, as a sweep names it (``tamperbench sweep`` sets each run's
        ``model``); the spec holds it as ``models``. Beside ``models`` it stays an unknown field."""
        if isinstance(data, dict) and "model" in data and "models" not in data:
            data = {k: v for k, v in data.items() if k != "model"} | {"models": (data["model"],)}
        return data

    @model_validator(mode="before")
    @classmethod
    def _choice_scope(cls, data):
        """Under ``choice`` the default scope is ``lifted`` alone: under ``active`` the hook is still on
        at the answer slot, so g is first-order leakage by construction (Section 3.6); a spec that
        names ``scopes`` gets them (active-scope choice records are labelled so)."""
        if isinstance(data, dict) and data.get("readout") == "choice" and "scopes" not in data:
            data = {**data, "scopes": ("lifted",)}
        return data

    @field_validator("positions")
    @classmethod
    def _positions(cls, v: str) -> str:
        if v in ("task", "last", "all"):
            return v
        parts = v.split(",")
        if not all(p.strip().isdigit() and len(p.strip()) <= 8 for p in parts):
            raise ValueError("must be 'task', 'last', 'all' or comma-separated token indices such as '0,1,2' "
                             f"(each below {MAX_POSITION})")
        out = sorted({int(p) for p in parts})
        if out[-1] >= MAX_POSITION:
            raise ValueError(f"token index {out[-1]} is beyond any context (indices below {MAX_POSITION})")
        return ",".join(str(n) for n in out)

    def absolute_positions(self) -> list[int]:
        """The declared token indices when ``positions`` lists them, else [] (task/last/all)."""
        return [] if self.positions in ("task", "last", "all") else [int(p) for p in self.positions.split(",")]

    @field_validator("temperature")
    @classmethod
    def _greedy(cls, v: float) -> float:
        if v != 0.0:
            raise ValueError("OWMI decodes deterministically (Section 6.1): temperature must be 0")
        return v

    @model_validator(mode="after")
    def _check(self) -> "OwmiSpec":
        for i, op in enumerate(self.operators):
            check_dose(op.name, op.dose, field=f"operators[{i}].dose")
        if "intervention" not in self.conditions:
            raise ValueError("conditions must include 'intervention' (every control is paired with it)")
        from tamperbench.owmi.protocol.probes import concepts

        for c in self.concepts:
            if c not in concepts():
                raise ValueError(f"concept {c!r} is not one of {', '.join(concepts())}")
        for t in self.tracks:
            if t not in TRACKS:
                raise ValueError(f"track {t!r}")
        if self.replace_directions is not None:
            lo, hi = self.replace_directions
            if not any(op.name == "replace" for op in self.operators):
                raise ValueError("replace_directions: set, but no 'replace' operator writes a direction")
            if hi - lo + 1 < self.items_per_benchmark * len(self.seeds):
                raise ValueError(f"replace_directions: {lo}..{hi} holds {hi - lo + 1} directions; one per unit needs "
                                 f"{self.items_per_benchmark * len(self.seeds)} (items_per_benchmark x seeds)")
        if self.readout == "choice" and "C" in self.tracks:
            raise ValueError("readout: 'choice' reads a closed option set, and Track C's spontaneous reflection has "
                             "none; drop track C or use readout 'generated' or 'constrained'")
        return self

    def direction_seed(self, index: int, seed: int) -> int | None:
        """The seed of the direction 'replace' writes in the unit of item ``index`` and ``seed``
        (``replace_directions``); None under the engine's reference."""
        if self.replace_directions is None:
            return None
        return self.replace_directions[0] + index * len(self.seeds) + self.seeds.index(seed)

    def frame(self, track: str) -> str:
        """The context frame ``track`` runs in (``protocol.design.frame``; kept on the spec for callers of
        earlier releases)."""
        from tamperbench.owmi.protocol.design import frame

        return frame(track, self.track_c_system)

    def frames(self) -> dict[str, tuple[str, ...]]:
        """frame -> the spec's tracks run in it, in spec order (``protocol.design.frames``)."""
        from tamperbench.owmi.protocol.design import frames

        return frames(self.tracks, self.track_c_system)

    @property
    def concept_cycle(self) -> tuple[str, ...]:
        from tamperbench.owmi.protocol.probes import concepts

        return self.concepts or tuple(concepts())


def load_spec(path: str | Path) -> OwmiSpec:
    """Read a spec file; every problem is one line naming the file and field."""
    path = Path(path)
    try:
        data = json.loads(read_capped(path, SPEC_FILE_MAX_BYTES, "spec file").decode("utf-8"))
    except FileNotFoundError:
        raise UserError(f"--config: {path} does not exist") from None
    except ValueError as err:
        raise UserError(f"--config: {path} is not valid JSON ({err})") from None
    return parse_spec(data, str(path))


def parse_spec(data: dict, where: str = "spec") -> OwmiSpec:
    try:
        return OwmiSpec.model_validate(data)
    except ValidationError as err:
        e = err.errors()[0]
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")  # a spec-wide check names its own field in its message
        raise UserError(f"{where}: {loc}: {msg}" if loc else f"{where}: {msg}") from None


def quick_spec(**over) -> OwmiSpec:
    """Quick preset: the method's axes at their smallest, on the embedded model in minutes on 2 CPU
    cores (with ``readout='choice'``). Two operators on one residual site (``add`` a concept direction
    and ``scale``), ``add`` at two doses (a dose ladder, so m0 and lambda are estimated or said to be
    not identified), two seeds (so sigma^2_seed is estimable), every condition, both scopes, the full
    probe battery, Track A, two built-in items (knowledge, commonsense). Trimmed to fit: one track, two
    items, 6 impact-matching steps and 12 task tokens, not the method's axes. The probe budget is 64
    tokens (the paper's 128 is the spec default)."""
    base = dict(
        objects=[{"kind": "resid_post", "layer": 12}],
        operators=[{"name": "add", "dose": 16.0}, {"name": "add", "dose": 64.0}, {"name": "scale", "dose": 0.5}],
        seeds=[0, 1], items_per_benchmark=2, tracks=["A"], task_max_new_tokens=12, probe_max_new_tokens=64,
        reflection_max_new_tokens=32, calibration_steps=6,
    )
    base.update(over)
    return OwmiSpec.model_validate(base)


def demo_spec(**over) -> OwmiSpec:
    """Demo preset (``tamperbench demo``): the quick preset's axes -- two operators, ``add`` at two doses,
    sham, random and every other condition, the observer classifier, both scopes, the full probe battery,
    two seeds -- on one built-in item per benchmark, with 4 impact-matching steps and 8 task tokens (trimmed
    to fit, not the method's axes), sized to a minute of CPU under ``readout='choice'``."""
    return quick_spec(**{"items_per_benchmark": 1, "calibration_steps": 4, "task_max_new_tokens": 8, **over})


def standard_spec(**over) -> OwmiSpec:
    """Standard preset (the results page's): the quick preset's axes -- two operators, ``add`` at two doses,
    two seeds, every condition, both scopes, the full probe battery, Track A -- on all nine built-in items
    (three each of knowledge, commonsense, arithmetic) instead of two: 4.5 times the quick preset's records,
    about 40 minutes of CPU on the embedded model under ``readout='choice'``."""
    return quick_spec(**{"items_per_benchmark": 9, **over})


PRESETS = {"quick": quick_spec, "demo": demo_spec, "standard": standard_spec}


# ---------------------------------------------------------------------- the items a spec runs
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
