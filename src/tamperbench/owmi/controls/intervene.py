"""The anchors' interventions: a unit direction added at one residual site, or its sham.

Reuses the engine's operators (``tamperbench.owmi.engine.operators.Intervention`` with the ``add``
operator, and ``identity=True`` for the sham, so sham passes take the same hook code path) and
its object resolution (``tamperbench.owmi.engine.objects``). Directions are drawn from a seed with
torch's generator, so a direction is named by its seed and the train/held-out ranges of the
known-positive anchor can be checked for disjointness by number.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def unit_direction(seed: int, dim: int) -> torch.Tensor:
    """A unit vector uniform on the sphere in R^dim, determined by ``seed``."""
    g = torch.Generator().manual_seed(int(seed))
    v = torch.randn(dim, generator=g, dtype=torch.float32)
    return v / v.norm()


def site_target(model, layer: int, site: str = "resid_post"):
    """The engine's object at ``site.layer`` (``owmi.objects.resolve``)."""
    from tamperbench.owmi.engine.objects import ObjectSpec, resolve

    return resolve(model, ObjectSpec.model_validate({"kind": site, "layer": layer}), field="anchor.site")


def intervention(model, layer: int, *, dose: float, direction: torch.Tensor | None, sham: bool,
                 positions: Sequence[int] | None = None, site: str = "resid_post", operator: str = "add",
                 reference: torch.Tensor | None = None, seed: int = 0):
    """An engine Intervention of ``operator`` at ``dose`` on ``site.layer`` (sham: identity hook): ``add``
    adds ``dose * direction``; ``replace`` needs ``reference``; ``noise`` draws from ``seed``."""
    from tamperbench.owmi.engine.operators import Intervention

    target = site_target(model, layer, site)
    if operator == "add" and direction is None:
        direction = torch.zeros(target.dim)
    return Intervention(target, operator, float(dose), positions=positions, direction=direction, reference=reference,
                        seed=seed, identity=sham)
