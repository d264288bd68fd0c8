"""The decoder's linear layers over oneDNN pre-packed weights (CPU, float32 only).

Why: ``nn.Linear`` on CPU calls MKL's sgemm, which re-packs the whole weight matrix on every
call. At decode batch sizes (8 to 64 rows, one token each) that re-packing costs about as much as
the multiply itself. oneDNN's inner product takes a weight packed once into its own blocked layout
(the layout inductor's ``freezing`` uses for CPU linears). Measured on the embedded model, one
thread: a decode step at batch 8 / 21 / 48 over a 200-token cache took 1.50x / 1.30x / 1.25x less
time, the output projection over the 49,152-word vocabulary gaining most (about 2x); at 2 / 4 / 8
rows 1.4x / 1.65x / 1.5x. A forward of one token alone is 0.92x (slower), so the decoder packs only
forwards of two tokens or more.

What it changes: outputs differ from MKL's by float32 rounding (about 1e-4 on the logits), the
same order as running a row at another batch size. Greedy tokens are checked against the plain
float32 batch-1 loop by benchmarks/sleight_throughput.py and the engine's reference tests.

Scope: only during the decoder's own forwards. A context manager gives each plain ``nn.Linear`` an
instance ``forward`` and removes it afterwards, so everyone else calling the model (the naive
reference loops, ``generate``, training) runs the untouched module, and forward hooks still fire
(``nn.Module.__call__`` runs them around whatever ``forward`` is). A weight changed in place
(training, a LoRA merge) is re-packed: a pack is keyed by the tensor's storage and version counter
(a fused group's by its biases' too).
Modules that already carry an instance ``forward`` (accelerate's offload hooks) are left alone.

Sibling projections of one input (an attention's ``q_proj``/``k_proj``/``v_proj``, an MLP's
``gate_proj``/``up_proj``) run as one product over their weights concatenated: fewer, wider calls,
measured 1.07-1.13x less time for those linears at 1 to 21 rows (the weights are read once either
way) and 1.05x less engine time on the paper-mix Sleight of Word workload (median of 2 interleaved
pairs, one thread, load 2.2-3.2; 48/48 trials token for token). Each output element is the same dot product in the same kernel, so the values must be
bitwise those of the separate products; that is checked on probe inputs of several row counts when
the group is first packed, and a group that differs stays separate (provenance is unchanged). The
first member called with an input computes the whole product; a sibling called with the very same
tensor takes its slice; any other input (a hook that replaced it, cross-attention) is computed
alone, so hooks keep seeing and changing exactly what they did. One case is not seen: a forward
pre-hook on a later sibling that changes the shared input *in place* (returning None) would get the
slice computed before its change; the decoder runs under ``inference_mode``, whose tensors keep no
version counter to detect it. Such a hook should return a new tensor (as OWMI's hooks do).

Cost: one more copy of the linear weights (0.5 GB for the embedded model), held once per model.
Off when that copy would exceed a quarter of the available memory, off on GPUs, for non-float32
weights, with gradients enabled, without oneDNN, or with ``TAMPERBENCH_PACKED_LINEAR=0``.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterator

import torch

__all__ = ["PackedLinears", "packed_linears_for"]

_BATCH_HINT = 32  # the batch oneDNN tunes the packed layout for; any batch size works with it
_SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))  # projections of one input
_PROBE_ROWS = (1, 2, 5, 12, 17, 21, 33, 64)  # row counts a fused group must match bitwise on
_PACKERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _wanted(model: torch.nn.Module) -> bool:
    if not (torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available()):
        return False
    if not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False
    lins = _linears(model)
    if not lins:
        return False
    nbytes = sum(m.weight.numel() * 4 for m in lins)
    import psutil

    return nbytes <= psutil.virtual_memory().available // 4


def _eligible(m: torch.nn.Module) -> bool:
    """A plain float32 CPU linear (subclasses may quantize or wrap: not touched)."""
    return (type(m) is torch.nn.Linear and m.weight.device.type == "cpu" and m.weight.dtype == torch.float32
            and (m.bias is None or m.bias.dtype == torch.float32))


def _linears(model: torch.nn.Module) -> list[torch.nn.Linear]:
    return [m for m in model.modules() if _eligible(m) and "forward" not in m.__dict__]  # type: ignore[misc]


def _groups(model: torch.nn.Module, lins: list[torch.nn.Linear]) -> list[list[torch.nn.Linear]]:
    """Sibling projections (see the module doc) that can share one product: same input width, all
    with or all without a bias."""
    ok = {id(m) for m in lins}
    out = []
    for parent in model.modules():
        for names in _SIBLINGS:
            ms = [getattr(parent, n, None) for n in names]
            if all(m is not None and id(m) in ok for m in ms) and len({m.in_features for m in ms}) == 1 \
                    and len({m.bias is None for m in ms}) == 1:
                out.append(ms)
    return out


class _Group:
    """One fused product shared by sibling projections, and the result waiting for the siblings."""

    def __init__(self, members: list[torch.nn.Linear]):
        self.members = members
        self.key: tuple | None = None
        self.packed: torch.Tensor | None = None
        self.bias: torch.Tensor | None = None
        self.fused = True  # False once the probe found the fused values differ
        self.bounds: list[tuple[int, int]] = []
        self.pending: tuple[torch.Tensor, torch.Tensor, set[int]] | None = None  # (input, output, members left)

    def prepare(self, pack_one) -> None:
        """(Re-)pack when a member's weight or bias changed; on the first pack, probe bitwise equality."""
        ws = [m.weight for m in self.members]
        key = tuple((t.data_ptr(), t._version) for t in [*ws, *(m.bias for m in self.members)] if t is not None)
        if key == self.key:
            return
        self.key, self.pending = key, None
        with torch.no_grad():
            w = torch.cat([x.detach() for x in ws])
            b = None if self.members[0].bias is None else torch.cat([m.bias.detach() for m in self.members])
            packed = torch.ops.mkldnn._reorder_linear_weight(w, _BATCH_HINT)
            edges = [0]
            for x in ws:
                edges.append(edges[-1] + x.shape[0])
            self.bounds = list(zip(edges, edges[1:]))
            gen = torch.Generator().manual_seed(0)
            for rows in _PROBE_ROWS:
                x = torch.randn(rows, w.shape[1], generator=gen)
                whole = _call(x, packed, b)
                if not all(torch.equal(whole[:, lo:hi], _call(x, pack_one(m), m.bias))
                           for m, (lo, hi) in zip(self.members, self.bounds)):
                    self.fused = False
                    return
        self.packed, self.bias = packed, b

    def forward_of(self, j: int):
        def forward(x: torch.Tensor) -> torch.Tensor:
            lo, hi = self.bounds[j]
            if self.pending is not None and self.pending[0] is x and j in self.pending[2]:
                _, y, left = self.pending
                left.discard(j)
                if not left:
                    self.pending = None
                return y[..., lo:hi]
            y = _call(x, self.packed, self.bias)
            self.pending = (x, y, set(range(len(self.members))) - {j})
            return y[..., lo:hi]

        return forward


def _call(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedLinears:
    """Pre-packed weights of one model's linears, and the context that routes them through oneDNN."""

    def __init__(self, model: torch.nn.Module):
        self.modules = _linears(model)
        self._packs: dict[int, tuple[tuple[int, int], torch.Tensor]] = {}
        self._index = {id(m): i for i, m in enumerate(self.modules)}
        self.groups = [_Group(ms) for ms in _groups(model, self.modules)]
        # the cached patch plan of active(): (module, forward) pairs, and what it was built from
        self._plan: list[tuple[torch.nn.Module, object]] = []
        self._plan_states: list[tuple] = []
        self._plan_lists: tuple | None = None

    def _pack(self, i: int, w: torch.Tensor) -> torch.Tensor:
        key = (w.data_ptr(), w._version)
        held = self._packs.get(i)
        if held is None or held[0] != key:
            with torch.no_grad():
                held = (key, torch.ops.mkldnn._reorder_linear_weight(w.detach(), _BATCH_HINT))
            self._packs[i] = held
        return held[1]

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Route the eligible linears through their packed weights for the block (see the module doc).

        The patch plan (which module gets which forward) is worked out once and reused while
        nothing it depends on changed: per module its class, whether it carries someone else's
        instance ``forward``, and its weight and bias (the objects, their storage and version
        counters), plus the module and group lists themselves. Any change rebuilds the plan, so a
        forward someone installed since is left alone and a weight changed in place is re-packed,
        as when the plan was rebuilt on every call (that walk cost about 1.7 ms a forward)."""
        if torch.is_grad_enabled():  # the packed op has no backward
            yield
            return
        if not self._plan_current():
            self._build_plan()
        patched = []
        try:
            for m, fn in self._plan:
                m.__dict__["forward"] = fn  # what nn.Module.__setattr__ does for a plain function
                patched.append(m)
            yield
        finally:
            for m in patched:
                m.__dict__.pop("forward", None)
            for g in self.groups:
                g.pending = None

    @staticmethod
    def _state(m: torch.nn.Module) -> tuple:
        d = m.__dict__
        params = d["_parameters"]
        w, b = params["weight"], params.get("bias")
        return (type(m), "forward" in d, w, w.data_ptr(), w._version, b,
                None if b is None else (b.data_ptr(), b._version))

    def _plan_current(self) -> bool:
        """Whether the cached plan still holds (see :meth:`active`); objects compared with ``is``."""
        lists = self._plan_lists
        if (lists is None or lists[0] is not self.modules or lists[1] is not self.groups
                or lists[2:] != (len(self.modules), len(self.groups))):
            return False
        for m, (cls, foreign, w, ptr, ver, bias, bias_key) in zip(self.modules, self._plan_states):
            d = m.__dict__
            params = d["_parameters"]
            w2, b2 = params["weight"], params.get("bias")
            if (type(m) is not cls or ("forward" in d) is not foreign or w2 is not w or w2._version != ver
                    or w2.data_ptr() != ptr or b2 is not bias or (b2 is not None and (b2.data_ptr(), b2._version) != bias_key)):
                return False
        return True

    def _build_plan(self) -> None:
        plan: list[tuple[torch.nn.Module, object]] = []
        planned: set[int] = set()
        for g in self.groups:
            if any("forward" in m.__dict__ or not _eligible(m) for m in g.members):
                continue
            g.prepare(lambda m: self._pack(self._index[id(m)], m.weight))
            if not g.fused:
                continue
            for m in g.members:  # the probe's separate packs: not needed while the group is fused
                self._packs.pop(self._index[id(m)], None)
            for j, m in enumerate(g.members):
                plan.append((m, g.forward_of(j)))
                planned.add(id(m))
        for i, m in enumerate(self.modules):
            if id(m) in planned or "forward" in m.__dict__ or not _eligible(m):  # someone else's forward; cast since
                continue
            plan.append((m, _packed_forward(self._pack(i, m.weight), m.bias)))
        self._plan = plan
        self._plan_states = [self._state(m) for m in self.modules]
        self._plan_lists = (self.modules, self.groups, len(self.modules), len(self.groups))


def _packed_forward(packed: torch.Tensor, bias: torch.Tensor | None):
    def forward(x: torch.Tensor) -> torch.Tensor:
        return _call(x, packed, bias)

    return forward


def packed_linears_for(model: torch.nn.Module) -> PackedLinears | None:
    """The model's shared packer (built on first use), or None where packing is off (see module doc).
    The environment switch is read on every call, so one process can time both ways."""
    if os.environ.get("TAMPERBENCH_PACKED_LINEAR", "1") == "0":
        return None
    if model in _PACKERS:
        return _PACKERS[model]
    packer = PackedLinears(model) if _wanted(model) else None
    _PACKERS[model] = packer
    return packer
