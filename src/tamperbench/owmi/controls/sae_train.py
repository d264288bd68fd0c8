"""``tamperbench owmi train-sae``: a small sparse autoencoder on one residual site, in SAELens's format.

Why: an ``sae_feature`` object needs SAE weights for the model it alters, and no SAE for the embedded
model can be downloaded on an offline machine. This trains one in minutes on a CPU from text the
package carries (the anchors' question pool, the probe battery's concept and neutral sentences), so
``examples/owmi_full.json`` runs as shipped.

The SAE is SAELens's ``standard`` architecture: f = ReLU(W_enc^T (x - b_dec) + b_enc),
x_hat = W_dec^T f + b_dec. Loss: mean squared reconstruction error plus ``l1`` times the sum of
|f_i| ||W_dec[i]|| (the decoder-norm-weighted L1 of Anthropic's April 2024 update, as SAELens's
standard training SAE uses), with Adam. W_dec rows start as random unit vectors, W_enc as their
transpose, b_dec as the activations' mean. The first token of each text is left out (an attention
sink whose norm would dominate the error). Deterministic given ``seed`` (and the thread count).

Written as SAELens writes it (``SAE.save_model``, format of sae-lens 6): ``cfg.json`` with d_in,
d_sae, dtype, device, apply_b_dec_to_input, normalize_activations, reshape_activations, metadata
(model_name, hook_name in TransformerLens naming ``blocks.L.hook_resid_post``, hook_layer) and
architecture, and ``sae_weights.safetensors`` with W_enc [d_in, d_sae], b_enc, W_dec [d_sae, d_in],
b_dec. ``tamperbench-sae.json`` beside them records the training (texts, steps, losses, seconds, the
model's weights sha256). The folder is written in a temporary sibling and renamed into place.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tamperbench.errors import UserError
from tamperbench.spec_base import Seed

SAE_LENS_FORMAT = "6.54.12"  # the sae-lens release whose save_model output this matches (checked in a test)
HOOK_NAMES = {"resid_post": "blocks.{layer}.hook_resid_post", "resid_pre": "blocks.{layer}.hook_resid_pre"}


class SaeTrainSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = "embedded"
    layer: int = Field(12, ge=0, le=4096)
    site: str = "resid_post"
    features: int = Field(1024, ge=8, le=65536)
    texts: int = Field(600, ge=16, le=20000)
    steps: int = Field(2000, ge=1, le=200000)
    batch_size: int = Field(512, ge=8, le=65536)
    learning_rate: float = Field(1e-3, gt=0, le=1.0, allow_inf_nan=False)
    l1: float = Field(5.0, ge=0, le=1e6, allow_inf_nan=False)
    seed: Seed = 0


PRESETS: dict[str, dict[str, object]] = {"full": {}, "demo": {"features": 256, "texts": 200, "steps": 300, "batch_size": 256}}


def corpus(n: int) -> list[str]:
    """``n`` texts the package carries: the probe battery's sentences, then the anchors' questions."""
    from tamperbench.owmi.controls.prompts import anchor_prompts
    from tamperbench.owmi.protocol.probes import battery

    data = battery()
    texts = [s for c in data["concepts"].values() for s in c] + list(data["neutral"])
    return (texts + [q for _, q in anchor_prompts(max(0, n - len(texts)), seed=11)])[:n]


def activations(backend, spec: SaeTrainSpec):
    """(tokens, d_in) float32 activations at the site over the corpus, first token of each text left out."""
    import torch

    site = f"{spec.site}.{spec.layer}"
    rows = []
    texts = corpus(spec.texts)
    for k in range(0, len(texts), 32):
        batch = [backend.encode(t) for t in texts[k:k + 32]]
        width = max(len(b) for b in batch)
        ids = torch.tensor([b + [backend.pad_id] * (width - len(b)) for b in batch])
        act = backend.capture([site], ids)[site].float()  # right padding: real tokens see no pad (causal)
        rows += [act[i, 1:len(b)] for i, b in enumerate(batch)]
    return torch.cat(rows)


def train(x, spec: SaeTrainSpec) -> tuple[dict, dict]:
    """(state dict in SAELens names, training record) of a standard SAE fitted to ``x`` (tokens, d_in)."""
    import torch

    g = torch.Generator().manual_seed(spec.seed)
    d_in = x.shape[1]
    w_dec = torch.randn(spec.features, d_in, generator=g)
    w_dec = (w_dec / w_dec.norm(dim=1, keepdim=True)).requires_grad_()
    w_enc = w_dec.detach().T.clone().requires_grad_()
    b_enc = torch.zeros(spec.features, requires_grad=True)
    b_dec = x.mean(0).clone().requires_grad_()
    opt = torch.optim.Adam([w_enc, b_enc, w_dec, b_dec], lr=spec.learning_rate)
    scale = float(x.pow(2).sum(1).mean())  # the error is reported relative to the data's mean squared norm
    losses, t0 = [], time.time()
    for _ in range(spec.steps):
        idx = torch.randint(0, x.shape[0], (min(spec.batch_size, x.shape[0]),), generator=g)
        batch = x[idx]
        f = torch.relu((batch - b_dec) @ w_enc + b_enc)
        mse = (f @ w_dec + b_dec - batch).pow(2).sum(1).mean()
        loss = mse + spec.l1 * (f * w_dec.norm(dim=1)).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append((float(mse.detach()) / scale, float((f > 0).float().sum(1).mean())))
    with torch.no_grad():
        f = torch.relu((x - b_dec) @ w_enc + b_enc)
        rel = float((f @ w_dec + b_dec - x).pow(2).sum(1).mean()) / scale
        l0 = float((f > 0).float().sum(1).mean())
        alive = int((f > 0).any(0).sum())
    state = {"W_enc": w_enc.detach().contiguous(), "b_enc": b_enc.detach(), "W_dec": w_dec.detach().contiguous(),
             "b_dec": b_dec.detach()}
    record = {"tokens": int(x.shape[0]), "steps": spec.steps, "seconds": round(time.time() - t0, 1),
              "relative_mse_first": losses[0][0], "relative_mse": rel, "l0": l0, "alive_features": alive,
              "torch_threads": torch.get_num_threads()}
    return state, record


def cfg_json(spec: SaeTrainSpec, d_in: int) -> dict:
    """``cfg.json`` as sae-lens 6's ``StandardSAE.save_model`` writes it."""
    return {"d_in": d_in, "d_sae": spec.features, "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": True,
            "normalize_activations": "none", "reshape_activations": "none",
            "metadata": {"model_name": spec.model, "hook_name": HOOK_NAMES[spec.site].format(layer=spec.layer),
                         "hook_layer": spec.layer, "sae_lens_version": SAE_LENS_FORMAT,
                         "sae_lens_training_version": SAE_LENS_FORMAT},
            "architecture": "standard"}


def train_sae(spec: SaeTrainSpec, out: Path, *, device: str = "cpu") -> dict:
    """Train and write the SAE folder ``out`` (refused if it exists and is not a finished SAE of this spec)."""
    import torch
    from safetensors.torch import save_file

    from tamperbench.models import load_backend

    if spec.site not in HOOK_NAMES:
        raise UserError(f"--site: {spec.site!r} is not one of {', '.join(HOOK_NAMES)}")
    out = Path(out)
    done = out / "tamperbench-sae.json"
    if done.is_file():
        try:
            prior = json.loads(done.read_text())
        except ValueError:
            prior = {}
        if prior.get("spec") == spec.model_dump(mode="json"):
            return {**prior, "reused": True}
        raise UserError(f"--out: {out} holds an SAE trained with another spec; remove it or choose another folder")
    if out.exists():
        raise UserError(f"--out: {out} exists and is not an SAE folder this command wrote")
    backend = load_backend(spec.model, device=device)
    n_layers = int(backend.model.config.num_hidden_layers)
    if not 0 <= spec.layer < n_layers:
        raise UserError(f"--layer: {spec.layer} out of range (model has {n_layers} layers)")
    torch.manual_seed(spec.seed)
    t0 = time.time()
    with torch.inference_mode():
        x = activations(backend, spec)
    capture_s = round(time.time() - t0, 1)
    state, record = train(x, spec)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".sae-", dir=out.parent))
    try:
        save_file(state, str(tmp / "sae_weights.safetensors"))
        (tmp / "cfg.json").write_text(json.dumps(cfg_json(spec, int(x.shape[1]))))
        info = {"spec": spec.model_dump(mode="json"), "model_sha256": backend.provenance.sha256,
                "model_provenance_id": backend.provenance_id, "capture_seconds": capture_s, **record}
        (tmp / "tamperbench-sae.json").write_text(json.dumps(info, indent=1))
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return info
