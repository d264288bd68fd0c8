"""The paired conditions (Section 3.4) and the directions they inject.

* ``intervention``: the operator at its dose on the object;
* ``sham``: the same hook installed, writing nothing back (same item, seed, code path);
* ``random_unit``: a seeded random unit direction added at the same site, scaled to the
  treatment's mean activation change (norm-matched, the literature's control);
* ``random_matched``: the same random direction with its norm calibrated by bisection so that the
  mean teacher-forced JS divergence from baseline matches the treatment's (Appendix C.2, Eq. 7);
  the match achieved is recorded;
* ``observer``: no intervention; a text-only reader of the visible record (engine).

Concept directions (for ``add`` and for a scorable reconstruction probe): the mean object value
over sentences about a concept minus the mean over neutral sentences, unit-normed; the concept's
label is known, so the model's reconstruction answer is right or wrong.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import torch

from tamperbench.owmi.engine.objects import ObjectSpec, Target, resolve


def stable_seed(*parts: object) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def random_direction(dim: int, seed: int) -> torch.Tensor:
    """A seeded random direction, uniform on the unit sphere."""
    v = torch.randn(dim, generator=torch.Generator().manual_seed(seed))
    return v / v.norm()


def random_target(model, target: Target) -> Target:
    """Where a random-direction control acts: the object's own space, except for an SAE feature
    (one dimension), whose control lives in the residual stream the SAE reads."""
    if target.spec.kind != "sae_feature":
        return target
    return resolve(model, ObjectSpec(kind=target.spec.sae_site, layer=target.spec.layer))


@torch.inference_mode()
def mean_value(backend, target: Target, texts: Sequence[str], last_only: bool = False) -> torch.Tensor:
    """Mean object value over the tokens (or the last token) of each text, then over texts."""
    vals = []
    for t in texts:
        ids = backend.tokenizer(t, add_special_tokens=False)["input_ids"]
        act = backend.capture([target.site], ids)[target.site]
        v = target.read(act)[0].float()
        vals.append(v[-1] if last_only else v.mean(0))
    return torch.stack(vals).mean(0)


def concept_direction(backend, target: Target, concept: str) -> torch.Tensor:
    from tamperbench.owmi.protocol.probes import battery

    data = battery()
    d = mean_value(backend, target, data["concepts"][concept]) - mean_value(backend, target, data["neutral"])
    return d / d.norm().clamp(min=1e-12)


def reference_activation(backend, target: Target) -> torch.Tensor:
    """The replace operator's reference: the object's value at the last token of a neutral sentence."""
    from tamperbench.owmi.protocol.probes import battery

    return mean_value(backend, target, battery()["neutral"][:1], last_only=True)


def replace_reference(backend, target: Target, spec, index: int, seed: int,
                      ref: torch.Tensor | None = None) -> torch.Tensor:
    """What 'replace' writes in the unit of item ``index`` and ``seed``: the engine's reference, or,
    under ``spec.replace_directions``, the seeded unit direction ``spec.direction_seed(index, seed)``
    scaled to the reference's norm (the known positive's construction, ``controls.known_positive``).
    ``ref``: :func:`reference_activation` of ``target``, when the caller already holds it (the engine
    computes it once per model and object, not once per unit: it depends on neither)."""
    if ref is None:
        ref = reference_activation(backend, target)
    d_seed = spec.direction_seed(index, seed)
    if d_seed is None:
        return ref
    return random_direction(target.dim, d_seed) * ref.float().norm()


def calibrate_norm(mean_js: Callable[[float], float], target_js: float, start: float, steps: int
                   ) -> tuple[float, float, list[list[float]]]:
    """Bisection on the norm eta so that ``mean_js(eta)`` matches ``target_js``.

    JS grows with the norm of an added direction (not strictly, hence: bracket by doubling,
    bisect, and keep the best eta seen). Returns (eta, achieved JS, trace of (eta, JS))."""
    trace: list[list[float]] = []

    def f(eta: float) -> float:
        js = mean_js(eta)
        trace.append([eta, js])
        return js

    lo, hi = 0.0, max(start, 1e-3)
    for _ in range(12):
        if f(hi) >= target_js:
            break
        lo, hi = hi, hi * 2.0
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if f(mid) < target_js:
            lo = mid
        else:
            hi = mid
    eta, js = min(trace, key=lambda t: abs(t[1] - target_js))
    return eta, js, trace
