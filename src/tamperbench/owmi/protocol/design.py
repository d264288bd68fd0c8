"""The design's vocabulary, read by every layer: what a spec may alter (:class:`ObjectSpec`), with
which operator and dose (:class:`OperatorSpec`, :func:`check_dose`), and the context frame each track
runs in (:func:`frame`).

Why in the protocol layer: these are the protocol's own terms (Section 5's objects and operators,
each dose in its stated domain; Section 3.3's Track C without an introspection cue). The run's spec
names them, the engine applies them (``engine/objects.py`` resolves an object on a model,
``engine/operators.py`` applies an operator), and the anchors reuse them: one definition, below
every layer that reads it. Nothing here loads torch or a model.

Each operator's dose has a stated domain, checked before any compute:

* ``zero``    v' = (1 - dose) v         dose in [0, 1]   (1 = full ablation)
* ``scale``   v' = dose v               dose >= 0        (1 = unchanged, Section 3.6)
* ``noise``   v' = v + dose rms(v) e    dose >= 0        e ~ N(0, I), seeded per run and position
* ``replace`` v' = (1 - dose) v + dose r dose in [0, 1]   r = a reference activation
* ``add``     v' = v + dose u           any finite dose  u = a unit direction
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tamperbench.errors import UserError

ObjectKind = Literal["resid_pre", "resid_post", "attn_out", "mlp_out", "head", "sae_feature"]
OperatorName = Literal["zero", "scale", "noise", "replace", "add"]
OPERATORS: tuple[str, ...] = ("zero", "scale", "noise", "replace", "add")
DOSE_DOMAIN = {"zero": (0.0, 1.0), "scale": (0.0, math.inf), "noise": (0.0, math.inf),
               "replace": (0.0, 1.0), "add": (-math.inf, math.inf)}

# WHY a bound on the unbounded doses (scale, noise, add): activations are float32 (max 3.4e38), and
# the next normalisation squares them. A dose of 1e6 times an activation of norm 1e4 (far above the
# residual norms of the models here) squares to 1e20 per coordinate, inside float32 with 18 orders of
# magnitude to spare; a dose of 1e308 overflows to inf and every JS divergence after it is NaN.
MAX_ABS_DOSE = 1e6


class ObjectSpec(BaseModel):
    """What to alter. ``sae_site`` is the residual site the SAE reads (SAELens ``hook_name``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ObjectKind
    layer: int
    head: int | None = None
    sae_path: str | None = None
    feature: int | None = None
    sae_site: Literal["resid_pre", "resid_post"] = "resid_post"

    @property
    def site(self) -> str:
        """The hook site string (``models/hooks.py``)."""
        base = {"head": "head_out", "sae_feature": self.sae_site}.get(self.kind, self.kind)
        return f"{base}.{self.layer}"

    @property
    def label(self) -> str:
        if self.kind == "head":
            return f"head_out.{self.layer}:h{self.head}"
        if self.kind == "sae_feature":
            return f"{self.sae_site}.{self.layer}:sae#{self.feature}"
        return self.site


def check_dose(operator: str, dose: float, field: str = "dose") -> None:
    """One-line refusal of a dose outside the operator's domain (or an unknown operator)."""
    if operator not in DOSE_DOMAIN:
        raise UserError(f"operator: {operator!r} is not one of {', '.join(OPERATORS)}")
    lo, hi = DOSE_DOMAIN[operator]
    if not math.isfinite(dose) or not lo <= dose <= hi:
        raise UserError(f"{field}: {dose} is outside the domain of '{operator}' ([{lo}, {hi}])")
    if abs(dose) > MAX_ABS_DOSE:
        raise UserError(f"{field}: {dose} is beyond what float32 activations can carry through the model "
                        f"(|dose| at most {MAX_ABS_DOSE:g})")


class OperatorSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: OperatorName
    dose: float


def frame(track: str, track_c_system: str = "none") -> str:
    """The context frame a track runs in: ``shared`` (the introspection system prompt) or ``neutral``
    (Track C under ``track_c_system='none'``: Track C carries no intervention cue, Section 3.3). A
    frame's units are prepared, impact-matched and run apart: its system message changes the task
    context itself."""
    return "neutral" if track == "C" and track_c_system == "none" else "shared"


def frames(tracks: tuple[str, ...], track_c_system: str = "none") -> dict[str, tuple[str, ...]]:
    """frame -> the tracks run in it, in the order given (a spec's ``tracks``)."""
    out: dict[str, tuple[str, ...]] = {}
    for t in tracks:
        out[frame(t, track_c_system)] = (*out.get(frame(t, track_c_system), ()), t)
    return out
