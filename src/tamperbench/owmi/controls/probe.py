"""Linear-probe sensitivity anchor (OWMI Section 7.2, Appendix C.8): is the intervention linearly
decodable from the activations the report would have to be formed from?

For each of ``n_items`` prompts we run two forward passes, a sham (identity hook at the site, same
code path) and an intervention (``dose`` x a seeded unit direction added at ``resid_post.L`` on
every prompt position), and capture the residual stream at L and at every deeper layer,
mean-pooled over prompt positions. Per read-out layer a logistic regression (scikit-learn,
standardised features) is trained on a split *by item* (both passes of an item fall on the same
side, so the probe cannot match an item to itself) and scored on the held-out items.

Null and pass rule. Each layer gets a label-shuffled permutation null (``n_perm`` refits, 200 by
default: training labels permuted, held-out labels true). The measured margin (accuracy - 0.5)
passes when it exceeds the null's 95th percentile. The source's released criterion instead
required the *largest* absolute permutation margin to stay below a fixed 0.1; a sampled maximum
grows with the number of draws, so the better the null is estimated the harder that test is to
pass, which is backwards (the source itself reports it failing at 5 and at 200 permutations while
the quantile test passes). We keep it computable as ``source_rule_pass`` and name it as
mis-specified in every output; it never decides anything. Perfect held-out accuracy is reported
as "no held-out error in n", not as an accuracy estimate.
"""

from __future__ import annotations

import time

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tamperbench.errors import UserError
from tamperbench.spec_base import Seed
# the statistics live apart (one job each; `make mutate` lists only the number-producing module)
from tamperbench.owmi.controls.probe_fit import split_items, describe_layer, fit_layer  # noqa: F401


BATCH = 16  # prompts per forward pass


class ProbeSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = "owmi_probe_anchor"
    model: str = "embedded"
    layer: int | None = None  # intervened residual site resid_post.L; None = mid-depth (n_layers // 2)
    read_layers: list[int] | None = None  # None = L and every deeper layer
    # C.8: the probe reads the cell's own intervention, so it takes the engine's operators and directions:
    # operator (add | zero | scale | noise | replace) at dose; add's direction is a seeded random unit vector
    # (direction_seed) or, with ``concepts``, the engine's concept directions cycled over the items (as the
    # engine cycles its concept list over a cell's items); replace writes the engine's reference activation
    operator: str = "add"
    dose: float = Field(8.0, gt=0, allow_inf_nan=False)  # add: norm of the added direction (median token norm at L=15 is ~170)
    direction_seed: Seed = 7  # add without concepts: the direction's seed; noise: the draw's seed
    concepts: list[str] | None = None
    n_items: int = Field(96, ge=8, le=2000)
    item_seed: Seed = 0
    test_fraction: float = Field(0.25, gt=0, lt=1)
    n_perm: int = Field(200, ge=0, le=10000)
    quantile: float = Field(0.95, gt=0.5, lt=1)
    split_seed: Seed = 0

    @model_validator(mode="after")
    def _check(self) -> "ProbeSpec":
        if self.layer is not None and self.layer < 0:
            raise ValueError("layer must be >= 0")
        if self.read_layers is not None and self.layer is not None and min(self.read_layers) < self.layer:
            raise ValueError("read_layers: every read-out layer must be at or deeper than the intervened layer")
        from tamperbench.owmi.engine.operators import DOSE_DOMAIN
        from tamperbench.owmi.protocol.probes import concepts

        if self.operator not in DOSE_DOMAIN:
            raise ValueError(f"operator: {self.operator!r} is not one of {', '.join(DOSE_DOMAIN)}")
        lo, hi = DOSE_DOMAIN[self.operator]
        if not lo <= self.dose <= hi:
            raise ValueError(f"dose: {self.dose} is outside the domain of '{self.operator}' ([{lo}, {hi}])")
        if self.concepts is not None and (self.operator != "add" or not self.concepts
                                          or any(c not in concepts() for c in self.concepts)):
            raise ValueError(f"concepts: only with operator add, a non-empty list of {', '.join(concepts())}")
        return self

    def intervention(self) -> dict:
        """What the probe's intervention is, in the terms a cell is matched on (``profile._anchor_for``)."""
        direction = (f"concepts {','.join(self.concepts)}" if self.concepts else
                     f"seeded random unit direction (seed {self.direction_seed})") if self.operator == "add" else None
        return {"operator": self.operator, "dose": self.dose, "direction": direction}


def collect(backend, spec: ProbeSpec) -> dict:
    """Mean-pooled activations per read layer for sham and intervention passes of every item."""
    import torch

    from tamperbench.owmi.controls.intervene import intervention
    from tamperbench.owmi.controls.prompts import anchor_prompts

    model = backend.model
    n_layers = int(model.config.num_hidden_layers)
    layer = n_layers // 2 if spec.layer is None else spec.layer
    if layer >= n_layers:
        raise UserError(f"layer: {layer} out of range (model has {n_layers} layers)")
    reads = list(range(layer, n_layers)) if spec.read_layers is None else sorted(set(spec.read_layers))
    if reads[-1] >= n_layers:
        raise UserError(f"read_layers: {reads[-1]} out of range (model has {n_layers} layers)")
    sites = [f"resid_post.{r}" for r in reads]
    items = anchor_prompts(spec.n_items, spec.item_seed)
    directions, reference = _directions(backend, spec, layer, len(items))
    feats = {r: np.zeros((2, len(items), int(model.config.hidden_size)), dtype=np.float32) for r in reads}
    all_ids = [backend.chat_ids([{"role": "user", "content": q}]) for _, q in items]
    prompts = [backend.decode(ids, skip_special_tokens=False) for ids in all_ids]
    for idx, direction in _batches(directions):
        chunk = [all_ids[i] for i in idx]
        width = max(map(len, chunk))
        # right padding: under causal attention a pad after the prompt cannot change the prompt's
        # activations, and pooling below uses each row's real positions only
        batch = torch.tensor([ids + [backend.pad_id] * (width - len(ids)) for ids in chunk])
        mask = torch.tensor([[1.0] * len(ids) + [0.0] * (width - len(ids)) for ids in chunk])[:, :, None]
        for cond in (0, 1):  # 0 sham, 1 intervention
            iv = intervention(model, layer, dose=spec.dose, direction=direction, sham=cond == 0, operator=spec.operator,
                              reference=reference, seed=spec.direction_seed)
            with backend.hooks(iv.hook_pairs()):
                acts = backend.capture(sites, batch)
            for r, s in zip(reads, sites):
                pooled = (acts[s].float() * mask).sum(dim=1) / mask.sum(dim=1)
                feats[r][cond, idx] = pooled.numpy()
    return {"layer": layer, "reads": reads, "items": items, "prompts": prompts, "features": feats,
            "direction_norm": 1.0}


def _directions(backend, spec: ProbeSpec, layer: int, n: int) -> tuple[list, object]:
    """Per item, the add direction (None for other operators), and the replace reference (else None):
    the engine's own (``owmi.conditions``), so the probe reads the intervention a cell applies."""
    from tamperbench.owmi.controls.intervene import site_target, unit_direction
    from tamperbench.owmi.engine.conditions import concept_direction, reference_activation

    target = site_target(backend.model, layer)
    reference = reference_activation(backend, target) if spec.operator == "replace" else None
    if spec.operator != "add":
        return [None] * n, reference
    if not spec.concepts:
        return [unit_direction(spec.direction_seed, target.dim)] * n, None
    by = {c: concept_direction(backend, target, c) for c in spec.concepts}
    return [by[spec.concepts[i % len(spec.concepts)]] for i in range(n)], None


def _batches(directions: list):
    """(item indices, direction) groups of at most BATCH items sharing one direction object."""
    groups: dict[int, list[int]] = {}
    for i, d in enumerate(directions):
        groups.setdefault(id(d), []).append(i)
    for idx in groups.values():
        for start in range(0, len(idx), BATCH):
            yield idx[start:start + BATCH], directions[idx[start]]


def run_probe_anchor(backend, spec: ProbeSpec) -> dict:
    """Collect activations and fit every read-out layer; returns a JSON-able result."""
    from threadpoolctl import threadpool_limits

    from tamperbench.owmi.score.anchor_store import weights_identity
    from tamperbench.owmi.controls.threads import idle_core_threads

    t0 = time.time()
    with idle_core_threads() as n_threads:
        data = collect(backend, spec)
    t_collect = time.time() - t0
    train, test = split_items(len(data["items"]), spec.test_fraction, spec.split_seed)
    layers = []
    with threadpool_limits(1):  # hundreds of small fits: threads only oversubscribe the cores
        for r in data["reads"]:
            f = data["features"][r]
            res = fit_layer(f[0], f[1], train, test, n_perm=spec.n_perm, quantile=spec.quantile,
                            seed=spec.split_seed + 1000 * r)
            layers.append({"read_layer": r, **res})
    at_site = layers[0]
    return {
        "kind": "probe", "spec": spec.model_dump(), "model": spec.model, **weights_identity(backend),
        "provenance_id": backend.provenance_id, "site": f"resid_post.{data['layer']}", "layer": data["layer"],
        "intervention": spec.intervention(),
        "item_ids": [i for i, _ in data["items"]], "prompts_sha": _sha(data["prompts"]),
        "train_items": int(train.size), "test_items": int(test.size), "layers": layers,
        "m_probe": at_site["margin"], "passes": at_site["passes"],
        "rule": f"margin > null {spec.quantile:.0%} quantile ({spec.n_perm} label-shuffled refits)",
        "source_rule": "max |null margin| < 0.1 (source's released criterion; mis-specified: a sampled maximum "
                       "grows with the number of permutations; reported, never used)",
        "seconds": {"collect": round(t_collect, 1), "fit": round(time.time() - t0 - t_collect, 1)},
        "torch_threads": n_threads,
    }


def _sha(texts: list[str]) -> str:
    import hashlib

    return hashlib.sha256("\n\x00".join(texts).encode()).hexdigest()
