"""``owmi train-sae`` on the real embedded model: a small SAE in SAELens's own disk format.

The folder is read back by sae-lens itself (``SAE.load_from_disk``) and by OWMI's object loader;
its cfg.json has exactly the keys sae-lens's ``save_model`` writes; ``examples/owmi_full.json``
passes preflight as shipped once the SAE sits at its path (no hub, no network).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tamperbench.errors import UserError

REPO = Path(__file__).resolve().parents[4]
pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def small_sae(tmp_path_factory, embedded_backend):
    from tamperbench.owmi.controls.sae_train import SaeTrainSpec, train_sae

    spec = SaeTrainSpec(features=32, texts=32, steps=30, batch_size=64)
    out = tmp_path_factory.mktemp("sae") / "smollm2-135m-resid-post-12"
    return spec, out, train_sae(spec, out, device="cpu")


def test_sae_is_in_sae_lens_format(small_sae, tmp_path):
    sae_lens = pytest.importorskip("sae_lens")
    from safetensors.torch import load_file
    from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig

    spec, out, info = small_sae
    assert info["tokens"] > 100 and info["relative_mse"] < info["relative_mse_first"]
    ref = tmp_path / "ref"
    StandardSAE(StandardSAEConfig(d_in=576, d_sae=32)).save_model(ref)  # sae-lens's own writer
    ours, theirs = json.loads((out / "cfg.json").read_text()), json.loads((ref / "cfg.json").read_text())
    assert ours.keys() == theirs.keys() and {k: ours[k] for k in ours if k != "metadata"} == \
        {k: theirs[k] for k in theirs if k != "metadata"}
    assert set(theirs["metadata"]) <= set(ours["metadata"]) and ours["metadata"]["hook_name"] == "blocks.12.hook_resid_post"
    assert {k: v.shape for k, v in load_file(str(out / "sae_weights.safetensors")).items()} == \
        {k: v.shape for k, v in load_file(str(ref / "sae_weights.safetensors")).items()}
    lens = sae_lens.SAE.load_from_disk(str(out), device="cpu")
    w = load_file(str(out / "sae_weights.safetensors"))
    assert torch.equal(lens.W_dec.detach(), w["W_dec"]) and lens.cfg.architecture() == "standard"


def test_owmi_reads_it_and_encodes_as_sae_lens(small_sae, embedded_backend):
    from tamperbench.owmi.engine.objects import ObjectSpec, resolve

    _, out, _ = small_sae
    target = resolve(embedded_backend.model, ObjectSpec(kind="sae_feature", layer=12, feature=5, sae_path=str(out)))
    assert target.sae.loader.startswith("sae-lens") and target.sae.d_sae == 32
    x = embedded_backend.capture(["resid_post.12"], embedded_backend.encode("The sea is calm."))["resid_post.12"][0]
    w = target.sae
    mine = torch.relu((x.float() - w.b_dec) @ w.W_enc + w.b_enc)  # the standard encoder by hand
    assert torch.allclose(w.encode(x), mine, atol=1e-4)


def test_rerun_reuses_and_other_spec_is_refused(small_sae):
    from tamperbench.owmi.controls.sae_train import train_sae

    spec, out, _ = small_sae
    assert train_sae(spec, out)["reused"] is True
    with pytest.raises(UserError, match="another spec"):
        train_sae(spec.model_copy(update={"seed": 1}), out)


def test_full_example_passes_preflight_as_shipped(small_sae, tmp_path, monkeypatch):
    """examples/owmi_full.json names saes/smollm2-135m-resid-post-12 relative to the working folder
    (where `make demo` trains it); with the SAE there, preflight passes with the file unchanged."""
    from tamperbench.owmi.run.spec import load_spec
    from tamperbench.owmi.run.runner import preflight

    _, out, _ = small_sae
    shutil.copytree(out, tmp_path / "saes" / "smollm2-135m-resid-post-12")
    monkeypatch.chdir(tmp_path)
    preflight(load_spec(REPO / "examples" / "owmi_full.json"))
