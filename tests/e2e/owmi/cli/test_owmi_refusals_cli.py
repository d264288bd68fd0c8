"""``tamperbench owmi run`` refuses a bad object on the real embedded model before any compute.

A layer or head index out of range and SAE weights whose width does not match the site are checked
against every model's config before any model loads (``owmi/run/runner.py``), as one ``error:``
line naming the model and the field, exit status 2, and no record stored. (A dose outside an
operator's domain is refused from the spec alone: tests/unit/owmi/run/test_owmi_spec.py; an
unsupported architecture: tests/unit/owmi/engine/test_owmi_objects_operators.py.) The CLI runs in-process
(``tb_inprocess``, tests/conftest.py: the console entry point, its error path and exit status);
``owmi run``'s subprocess smoke test is tests/e2e/owmi/cli/test_owmi_cli.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tamperbench.store import RunStore

REPO = Path(__file__).resolve().parents[4]
pytestmark = pytest.mark.model


def _sae(folder: Path, d_in: int, d_sae: int = 4) -> None:
    """SAELens disk format: cfg.json + sae_weights.safetensors."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    save_file({"W_enc": torch.zeros(d_in, d_sae), "W_dec": torch.zeros(d_sae, d_in), "b_enc": torch.zeros(d_sae),
               "b_dec": torch.zeros(d_in)}, str(folder / "sae_weights.safetensors"))
    (folder / "cfg.json").write_text(json.dumps({
        "d_in": d_in, "d_sae": d_sae, "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": True,
        "normalize_activations": "none", "reshape_activations": "none", "architecture": "standard",
        "metadata": {"hook_name": "blocks.3.hook_resid_post", "hook_layer": 3, "sae_lens_version": "6.54.12"}}))


@pytest.mark.parametrize("objects, needle", [
    ([{"kind": "resid_post", "layer": 12}, {"kind": "resid_pre", "layer": 30}], "objects[1].layer: 30 out of range"),
    ([{"kind": "head", "layer": 2, "head": 9}], "objects[0].head"),  # 9 query heads: 0..8
    ([{"kind": "sae_feature", "layer": 3, "feature": 0, "sae_path": "SAE"}], "objects[0].sae_path: SAE width d_in=512"),
])
def test_bad_object_refused_before_compute(tmp_path, embedded_backend, tb_inprocess, objects, needle):
    _sae(tmp_path / "sae", d_in=512)  # the embedded model's residual width is 576
    for o in objects:
        if o.get("sae_path") == "SAE":
            o["sae_path"] = str(tmp_path / "sae")
    run, err, lines = _refused_run(tb_inprocess, tmp_path, {"objects": objects, "operators": [{"name": "scale", "dose": 0.5}],
                                              "items_per_benchmark": 1, "probes": ["detection"],
                                              "observer_classifier": False})
    assert lines[-1].startswith("error:") and needle in lines[-1], err[-2000:]
    assert "Traceback" not in err
    _nothing_stored(run)


def _refused_run(tb_inprocess, tmp_path: Path, config: dict) -> tuple[Path, str, list[str]]:
    """``owmi run`` on ``config`` through the CLI's entry point, expected to be refused with exit status 2:
    (the run directory, stderr, its non-blank lines)."""
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(config))
    run = tmp_path / "run"
    p = tb_inprocess("owmi", "run", "--config", str(cfg), "--out", str(run), cwd=REPO)
    assert p.returncode == 2, p.stderr[-2000:]
    return run, p.stderr, [ln for ln in p.stderr.splitlines() if ln.strip()]


def _nothing_stored(run: Path) -> None:
    if not run.exists():  # refused from the configs before the run directory is opened
        return
    with RunStore.open_existing(run, read_only=True) as st:
        assert not st.has_table("owmi_runs") or st.count("owmi_runs") == 0
        assert not st.has_table("owmi_calibration") or st.count("owmi_calibration") == 0


def test_bad_object_for_second_model_refused_before_first_runs(tmp_path, embedded_backend, tb_inprocess):
    """Two models: layer 12 exists in the embedded model (30 layers) but not in a tiny random
    llama saved beside it (2 layers). The refusal names the second model and the field, and comes
    before the first model computes anything: no run directory at all."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    tiny = tmp_path / "tiny"
    cfg_t = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    AutoModelForCausalLM.from_config(cfg_t).save_pretrained(tiny)
    run, err, lines = _refused_run(tb_inprocess, tmp_path, {"models": ["embedded", str(tiny)],
                                              "objects": [{"kind": "resid_post", "layer": 12}],
                                              "operators": [{"name": "scale", "dose": 0.5}], "items_per_benchmark": 1,
                                              "probes": ["detection"], "observer_classifier": False})
    assert len(lines) == 1, err[-2000:]
    assert lines[0].startswith("error: models[1]") and str(tiny) in lines[0], lines[0]
    assert "objects[0].layer: 12 out of range (model has 2 layers" in lines[0], lines[0]
    assert not run.exists() or not any(run.iterdir()), "nothing may be written for the first model"


def test_remote_model_refused_before_the_first_model_runs(tmp_path, tb_inprocess):
    """A remote backend among the hooked models (``openai:``, which offers no hooks) is refused on
    the real CLI from the spec alone: one ``error:`` line naming the field, exit status 2, and the
    embedded model listed before it never runs (no run directory)."""
    run, err, lines = _refused_run(tb_inprocess, tmp_path, {"models": ["embedded", "openai:gpt-4o-mini"],
                                              "objects": [{"kind": "resid_post", "layer": 3}],
                                              "operators": [{"name": "scale", "dose": 0.5}], "items_per_benchmark": 1,
                                              "probes": ["detection"], "observer_classifier": False})
    assert lines[-1].startswith("error: models[1] (openai:gpt-4o-mini): OWMI alters the model's internals"), err
    assert "Traceback" not in err and not run.exists()
