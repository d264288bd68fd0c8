"""Computational objects an OWMI intervention alters (protocol Section 5, Appendix C.1 "O").

Why a small resolved ``Target`` per object: operators (zero, scale, noise, replace, add) are
written once against an object's *value* -- a ``(batch, seq, dim)`` view -- and the target knows
how to read that value out of the hooked activation and write a changed value back. So every
object-operator pair is the same two calls, and "changes exactly the declared object" is one
property to test per object, not per pair.

Objects (all addressed through the site table of ``models/hooks.py``):

* ``resid_pre`` / ``resid_post``: the residual stream before / after decoder layer L;
* ``attn_out`` / ``mlp_out``: the block outputs (attention, MLP) before they join the residual;
* ``head``: query head h's slice at the input of o_proj (GQA aware: query heads, not KV heads);
* ``sae_feature``: one SAE feature; the value is its activation f, and a changed value f' is
  written back as the single-feature delta ``x + (f' - f) * W_dec[feature]`` (the rest of the
  residual, including the SAE's reconstruction error, is untouched).

Everything is validated by :func:`resolve` before any compute, with one-line UserErrors naming
the field: layer / head index out of range, unsupported architecture, SAE weights missing or of
a width that does not match the site.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING

from tamperbench.errors import UserError
from tamperbench.owmi.protocol.design import ObjectKind as ObjectKind  # the design's terms, named here as before
from tamperbench.owmi.protocol.design import ObjectSpec as ObjectSpec

if TYPE_CHECKING:  # torch loads when a target is used, not when a spec is read (`owmi run` checks it first)
    import torch

SAE_CFG_MAX_BYTES = 1 << 20  # an SAELens cfg.json is a few hundred bytes


class SAE:
    """A linear SAE in SAELens's disk format (``cfg.json`` + ``sae_weights.safetensors``).

    Loaded through sae-lens (``SAE.load_from_disk``) when it is installed (the ``saelens`` extra), which
    then also encodes (any architecture it knows); otherwise read with safetensors here, where the
    encoder is ``f = act(W_enc^T (x - b_dec) + b_enc)`` with ReLU (``standard``) or JumpReLU
    (``jumprelu``, uses ``threshold``). Either way the decoder row ``W_dec[i]`` is feature i's
    direction. ``loader`` says which read it.
    """

    def __init__(self, folder: str | Path, field: str = "object.sae_path"):
        folder = Path(folder)
        cfg_path, w_path = folder / "cfg.json", folder / "sae_weights.safetensors"
        if not cfg_path.is_file() or not w_path.is_file():
            raise UserError(f"{field}: {folder} has no SAELens weights (need cfg.json and sae_weights.safetensors)")
        from tamperbench.safeio.files import read_capped

        try:
            self.cfg = json.loads(read_capped(cfg_path, SAE_CFG_MAX_BYTES, "SAE cfg.json"))
        except ValueError:
            raise UserError(f"{field}: {cfg_path} is not valid JSON") from None
        if not isinstance(self.cfg, dict):
            raise UserError(f"{field}: {cfg_path} is not a JSON object")
        self._lens = None
        if importlib.util.find_spec("sae_lens") is not None:
            self._load_lens(folder, field)
        else:
            self._load_safetensors(w_path, field)
        self.d_in, self.d_sae = self.W_enc.shape
        if self.W_dec.shape != (self.d_sae, self.d_in):
            raise UserError(f"{field}: W_dec is {tuple(self.W_dec.shape)}, expected ({self.d_sae}, {self.d_in})")
        for key, want in (("d_in", self.d_in), ("d_sae", self.d_sae)):
            if key in self.cfg and int(self.cfg[key]) != want:
                raise UserError(f"{field}: cfg.json {key}={self.cfg[key]} but the weights have {want}")

    def _load_lens(self, folder: Path, field: str) -> None:
        import sae_lens
        from sae_lens import SAE as LensSAE

        try:
            lens = LensSAE.load_from_disk(str(folder), device="cpu")
        except Exception as err:  # sae-lens raises many kinds for a folder it cannot read
            msg = str(err).splitlines()[0][:200] if str(err) else ""
            raise UserError(f"{field}: sae-lens cannot load {folder} ({type(err).__name__}: {msg})") from None
        lens.eval()
        self._lens = lens
        self.W_enc, self.W_dec = lens.W_enc.detach().float(), lens.W_dec.detach().float()
        self.b_dec = lens.b_dec.detach().float()
        self.b_enc = getattr(lens, "b_enc", None)
        self.threshold = getattr(lens, "threshold", None)
        self.architecture = lens.cfg.architecture()
        self.loader = f"sae-lens {sae_lens.__version__}"

    def _load_safetensors(self, w_path: Path, field: str) -> None:
        from safetensors.torch import load_file

        w = load_file(str(w_path))
        for name in ("W_enc", "W_dec", "b_enc", "b_dec"):
            if name not in w:
                raise UserError(f"{field}: {w_path} lacks tensor {name!r}")
        self.W_enc, self.W_dec, self.b_enc, self.b_dec = (w[n].float() for n in ("W_enc", "W_dec", "b_enc", "b_dec"))
        self.threshold = w.get("threshold")
        self.architecture = self.cfg.get("architecture", "standard")
        if self.architecture not in ("standard", "jumprelu"):
            raise UserError(f"{field}: SAE architecture {self.architecture!r} unsupported without sae-lens (standard, "
                            "jumprelu); pip install 'tamperbench[saelens]' for the others")
        if self.architecture == "jumprelu" and self.threshold is None:
            raise UserError(f"{field}: a jumprelu SAE needs a 'threshold' tensor")
        self.loader = "safetensors (tamperbench's standard/jumprelu encoder)"

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        import torch

        if self._lens is not None:
            with torch.no_grad():
                return self._lens.to(x.device).encode(x.float()).float()
        pre = (x.float() - self.b_dec.to(x.device)) @ self.W_enc.to(x.device) + self.b_enc.to(x.device)
        if self.architecture == "jumprelu":
            return pre * (pre > self.threshold.to(x.device).float())
        return torch.relu(pre)


_SAES: dict[tuple, SAE] = {}


def load_sae(folder: str | Path, field: str) -> SAE:
    """An SAE folder, loaded once per process while its files are unchanged (sae-lens loads are slow)."""
    path = Path(folder)
    try:
        key = (str(path.resolve()), *((p.stat().st_mtime_ns, p.stat().st_size)
                                      for p in (path / "cfg.json", path / "sae_weights.safetensors")))
    except OSError:
        return SAE(path, field=field)  # missing files: its one-line error
    if key not in _SAES:
        _SAES[key] = SAE(path, field=field)
    return _SAES[key]


class Target:
    """An object resolved against one model: the hook site, the value's width, read and write."""

    def __init__(self, spec: ObjectSpec, site: str, dim: int, sae: SAE | None = None):
        self.spec, self.site, self.dim, self.sae = spec, site, dim, sae

    def read(self, act: torch.Tensor) -> torch.Tensor:
        """The object's value, (batch, seq, dim), from the hooked activation."""
        if self.spec.kind == "head":
            return act[:, :, self.spec.head, :]
        if self.sae is not None:
            feature = int(self.spec.feature or 0)  # set for kind sae_feature (the spec validates it)
            return self.sae.encode(act)[..., feature: feature + 1]
        return act

    def write(self, act: torch.Tensor, cols: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
        """The activation with the object's value at sequence columns ``cols`` replaced by ``new``
        (``old`` = the value read there). Everything else is copied unchanged."""
        out = act.clone()
        if self.spec.kind == "head":
            out[:, cols, self.spec.head, :] = new.to(act.dtype)
        elif self.sae is not None:
            direction = self.sae.W_dec[self.spec.feature].to(act.device)
            out[:, cols] = (act[:, cols].float() + (new - old) * direction).to(act.dtype)
        else:
            out[:, cols] = new.to(act.dtype)
        return out


def resolve(model, spec: ObjectSpec, field: str = "object") -> Target:
    """Validate ``spec`` against ``model`` (no forward pass) and return its Target."""
    from tamperbench.models.hooks import ARCHITECTURES, check_head, head_layout

    cfg = model.config
    kind = getattr(cfg, "model_type", None)
    if kind not in ARCHITECTURES:
        raise UserError(f"{field}: architecture {kind!r} is not supported (supported: {', '.join(sorted(ARCHITECTURES))})")
    n_layers = int(cfg.num_hidden_layers)
    if not 0 <= spec.layer < n_layers:
        raise UserError(f"{field}.layer: {spec.layer} out of range (model has {n_layers} layers, 0..{n_layers - 1})")
    hidden = int(cfg.hidden_size)
    if spec.kind == "head":
        if spec.head is None:
            raise UserError(f"{field}.head: a head object needs a head index")
        check_head(model, spec.layer, spec.head, field=f"{field}.head")
        return Target(spec, spec.site, head_layout(cfg)[2])
    if spec.head is not None:
        raise UserError(f"{field}.head: only a 'head' object takes a head index (kind is {spec.kind!r})")
    if spec.kind == "sae_feature":
        if not spec.sae_path:
            raise UserError(f"{field}.sae_path: an sae_feature object needs local SAE weights (SAELens folder); none given")
        sae = load_sae(spec.sae_path, field=f"{field}.sae_path")
        if sae.d_in != hidden:
            raise UserError(f"{field}.sae_path: SAE width d_in={sae.d_in} does not match the site {spec.site} "
                            f"(hidden size {hidden})")
        if spec.feature is None or not 0 <= spec.feature < sae.d_sae:
            raise UserError(f"{field}.feature: {spec.feature} out of range (SAE has {sae.d_sae} features)")
        return Target(spec, spec.site, 1, sae)
    if spec.feature is not None or spec.sae_path is not None:
        raise UserError(f"{field}: feature/sae_path apply only to an sae_feature object (kind is {spec.kind!r})")
    return Target(spec, spec.site, hidden)
