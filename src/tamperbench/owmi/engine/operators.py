"""Intervention operators with a dose, and the hook that applies one to one object.

Why a dose on every operator (Section 5): "each operator's strength parameter is a dose we set
and vary, never a constant we tune until something happens". Each operator's dose has a stated
domain (``protocol/design.py``: ``DOSE_DOMAIN``, ``check_dose``), checked before any compute:

* ``zero``    v' = (1 - dose) v         dose in [0, 1]   (1 = full ablation)
* ``scale``   v' = dose v               dose >= 0        (1 = unchanged, Section 3.6)
* ``noise``   v' = v + dose rms(v) e    dose >= 0        e ~ N(0, I), seeded per run and position
* ``replace`` v' = (1 - dose) v + dose r dose in [0, 1]   r = a reference activation
* ``add``     v' = v + dose u           any finite dose  u = a unit direction

Temporal scope. An :class:`Intervention` is driven by the engine through ``phase``:
``"prefill"`` (the task prompt: the declared positions are altered), ``"decode"`` (generated task
tokens: altered only when ``when == "every_step"``) and ``"probe"`` (probe prompt and answer:
altered only when the hook scope is ``active``; ``lifted`` leaves the probe unaltered over the
perturbed cache). ``offset`` is the absolute position of column 0 of the current forward, so a
declared position means the same token whether the prompt arrives in one forward or in chunks.

Noise is keyed by (seed, absolute token position) (:func:`noise_draw`), not drawn from one
stream in call order: then a position's noise cannot depend on how many forwards ran before it
-- batch composition, finished rows compacted away, chunking, probe families run earlier, or a
resumed run -- so the batched and the one-at-a-time engines alter a position identically.

Rows. ``rows`` (indices, or a callable re-evaluated per forward) restricts the hook to chosen
batch rows, so the conditions of an item can share one batch (``models.hooks.row_targeted``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from tamperbench.errors import UserError
from tamperbench.owmi.engine.objects import Target
from tamperbench.owmi.protocol.design import DOSE_DOMAIN as DOSE_DOMAIN  # the design's terms, named here as before
from tamperbench.owmi.protocol.design import MAX_ABS_DOSE as MAX_ABS_DOSE
from tamperbench.owmi.protocol.design import OPERATORS as OPERATORS
from tamperbench.owmi.protocol.design import OperatorName as OperatorName
from tamperbench.owmi.protocol.design import OperatorSpec as OperatorSpec
from tamperbench.owmi.protocol.design import check_dose as check_dose

if TYPE_CHECKING:  # torch loads at the first draw or hook call, not when a spec is read (see objects.py)
    import torch

def noise_seed(seed: int, position: int) -> int:
    """The generator seed of the noise at one absolute token position (plain arithmetic, so a test
    can recompute it by hand)."""
    return (int(seed) * 1_000_003 + int(position)) % 2**63


def noise_draw(seed: int, positions: Sequence[int], dim: int) -> torch.Tensor:
    """(len(positions), dim) standard normal noise, row j drawn from ``noise_seed(seed, positions[j])``."""
    import torch

    return torch.stack([torch.randn(dim, generator=torch.Generator().manual_seed(noise_seed(seed, p)),
                                    dtype=torch.float32) for p in positions])


def apply_operator(name: str, dose: float, v: torch.Tensor, *, direction: torch.Tensor | None = None,
                   reference: torch.Tensor | None = None, eps: torch.Tensor | None = None) -> torch.Tensor:
    """The changed value v' of an object value ``v`` (..., cols, dim), computed in float32.
    ``eps``: the noise operator's draw, broadcastable to ``v`` (see :func:`noise_draw`)."""
    v = v.float()
    if name == "zero":
        return (1.0 - dose) * v
    if name == "scale":
        return dose * v
    if name == "noise":
        if eps is None:
            raise UserError("operator noise: needs a noise draw")
        eps = eps.to(v.device)
        rms = v.pow(2).mean(-1, keepdim=True).sqrt()
        return v + dose * rms * eps
    if name == "replace":
        if reference is None:
            raise UserError("operator replace: needs a reference activation")
        return (1.0 - dose) * v + dose * reference.float().to(v.device)
    if name == "add":
        if direction is None:
            raise UserError("operator add: needs a direction")
        return v + dose * direction.float().to(v.device)
    raise UserError(f"operator: {name!r} is not one of {', '.join(OPERATORS)}")


Phase = Literal["prefill", "decode", "probe"]


class Intervention:
    """One operator on one object at declared positions; produces the hook pair for ``hooks()``.

    ``positions``: absolute token positions altered during prefill (``None`` = every position).
    ``identity=True`` makes a sham: the hook is installed and reads the object but writes back
    the value unchanged, so sham runs take the same code path as treated runs.
    """

    def __init__(self, target: Target, operator: str, dose: float, *, positions: Sequence[int] | None = None,
                 when: Literal["prefill", "every_step"] = "prefill", scope: Literal["active", "lifted"] = "active",
                 direction: torch.Tensor | None = None, reference: torch.Tensor | None = None, seed: int = 0,
                 rows: Callable[[], Sequence[int] | None] | Sequence[int] | None = None, identity: bool = False):
        check_dose(operator, dose)
        if operator == "add" and direction is not None and direction.shape[-1] != target.dim:
            raise UserError(f"direction: width {direction.shape[-1]} does not match the object ({target.dim})")
        self.target, self.operator, self.dose = target, operator, float(dose)
        self.positions = None if positions is None else sorted(set(int(p) for p in positions))
        self.when, self.scope, self.direction, self.reference = when, scope, direction, reference
        self.rows, self.identity = rows, identity
        self.seed = int(seed)
        self.phase: Phase = "prefill"
        self.offset = 0
        self.cols_at: list[int] | None = None  # absolute position of each column when not offset + column
        self.altered: list[int] = []  # absolute positions altered so far (prefill and later)
        self.delta_norms: list[float] = []  # L2 norm of the change at each altered position (row-mean)
        self.calls = 0

    def _columns(self, seq: int) -> list[int]:
        if self.phase == "prefill":
            if self.positions is None:
                return list(range(seq))
            return [p - self.offset for p in self.positions if self.offset <= p < self.offset + seq]
        if self.phase == "decode":
            return list(range(seq)) if self.when == "every_step" else []
        return list(range(seq)) if self.scope == "active" else []

    def _fn(self, act: torch.Tensor) -> torch.Tensor | None:
        import torch

        self.calls += 1
        cols = self._columns(act.shape[1])
        if not cols:
            return None
        idx = torch.tensor(cols, device=act.device)
        old = self.target.read(act)[:, idx].float()
        if self.identity:
            return None
        at = [self.cols_at[c] if self.cols_at is not None else self.offset + c for c in cols]
        eps = noise_draw(self.seed, at, old.shape[-1]) if self.operator == "noise" else None
        new = apply_operator(self.operator, self.dose, old, direction=self.direction, reference=self.reference, eps=eps)
        out = self.target.write(act, idx, new, old)
        change = (out[:, idx].float() - act[:, idx].float()).flatten(2).norm(dim=-1).mean(0)
        self.delta_norms.extend(change.tolist())
        self.altered.extend(at)
        return out

    def hook_pairs(self) -> list[tuple[str, Callable]]:
        from tamperbench.models.hooks import row_targeted

        return [(self.target.site, row_targeted(self._fn, self.rows))]

    @property
    def mean_delta_norm(self) -> float:
        return float(sum(self.delta_norms) / len(self.delta_norms)) if self.delta_norms else 0.0
