"""Issue 35 (Medium 3, 4, 6, 8 and the Low items): hostile files, each through the real CLI.

Every payload is a file this test creates under ``tmp_path``. Memory bombs and files that could hang a read
(FIFOs, devices) go through ``python -m tamperbench.cli`` in a subprocess, under an address-space limit
(``RLIMIT_AS`` set in the child only) and a timeout, so a regression fails the test instead of harming the
machine; the other cases run the same console entry point in this process (``tb_inprocess``: argv check,
typer, the error classifier, ``sys.exit``, the session's loaded model), which shows the same exit status and
stderr without an interpreter start and a model load per case. Each case checks the one ``error:`` line (exit 2, no traceback, exactly one
stderr line) and what names the culprit. The embedded model's cached config is read for the adapter and
OWMI cases; no weights load before a refusal.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import struct
import subprocess
import sys
from pathlib import Path

import pytest

TB = [sys.executable, "-m", "tamperbench.cli"]
GIB = 1 << 30


def cli(args: list, cwd: Path, *, timeout: float = 120, address_space: int | None = None,
        home: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", **({"TAMPERBENCH_HOME": str(home)} if home else {}))
    env.pop("TAMPERBENCH_DEBUG", None)

    def limit() -> None:
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    p = subprocess.run([*TB, *map(os.fsencode, args)], capture_output=True, cwd=cwd, env=env, timeout=timeout,
                       preexec_fn=limit)
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode("utf-8", "replace"),
                                       p.stderr.decode("utf-8", "replace"))


@pytest.fixture
def tb(tb_inprocess):
    """``tb(args, cwd)``: ``cli``'s call in this process, for the cases with no bomb and nothing that could hang."""
    return lambda args, cwd: tb_inprocess(*args, cwd=cwd)


def one_line(p: subprocess.CompletedProcess, *needles: str) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr[-3000:]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# --- Medium 3: GGUF header bomb ------------------------------------------------------------------

def _gguf_bomb(path: Path) -> Path:
    """72 bytes: GGUF v3, no tensors, one metadata key whose value is a uint8 array of 2^40 elements."""
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 8) + b"bomb.arr"
    head += struct.pack("<IIQ", 9, 0, 1 << 40)
    path.write_bytes(head.ljust(72, b"\0"))
    return path


def test_gguf_header_bomb_is_one_line_under_a_4gb_address_space(tmp_path):
    bomb = _gguf_bomb(tmp_path / "bomb.gguf")
    assert bomb.stat().st_size == 72
    p = cli(["sleight", "run", "--model", bomb, "--out", tmp_path / "run"], tmp_path, timeout=60,
            address_space=4 * GIB, home=tmp_path / "home")  # a bomb that got through writes no shared cache
    one_line(p, "bomb.gguf", "not a valid GGUF file", str(1 << 40))
    assert not (tmp_path / "run").exists()


def test_gguf_tensor_with_impossible_shape_is_refused(tmp_path):
    from tamperbench.errors import UserError
    from tamperbench.models.gguf_header import read_header

    f = tmp_path / "t.gguf"
    f.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", 1) + b"w" + struct.pack("<I", 2)
                  + struct.pack("<QQ", 1 << 31, 1 << 31) + struct.pack("<IQ", 0, 0))
    with pytest.raises(UserError, match="declares 4611686018427387904 elements"):
        read_header(f)


def test_the_embedded_gguf_header_reads_within_its_bounds():
    from tamperbench.models.gguf_header import quantization, read_header
    from tamperbench.models.sources import embedded_gguf_path

    assert quantization(read_header(embedded_gguf_path())) == "Q4_1 GGUF dequantized to float32"


# --- Medium 3, 4 and the Low adapter items: the adapter check -----------------------------------------

def _adapter(folder: Path, *, r: int = 4, cfg: dict | None = None, rank: int = 4) -> Path:
    """A LoRA folder for the embedded model (hidden 576): layer 0's q_proj, tensors of rank ``rank``."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    pre = "base_model.model.model.layers.0.self_attn.q_proj"
    save_file({f"{pre}.lora_A.weight": torch.zeros(rank, 576), f"{pre}.lora_B.weight": torch.zeros(576, rank)},
              str(folder / "adapter_model.safetensors"))
    base = {"peft_type": "LORA", "r": r, "lora_alpha": 8, "target_modules": ["q_proj"], "task_type": "CAUSAL_LM"}
    (folder / "adapter_config.json").write_text(json.dumps({**base, **(cfg or {})}))
    return folder


def _owmi_argv(model: str, tmp: Path) -> list:
    return ["owmi", "run", "--preset", "quick", "--model", model, "--out", tmp / "run"]


def _owmi_with(model: str, tmp: Path, **kw) -> subprocess.CompletedProcess:
    return cli(_owmi_argv(model, tmp), tmp, **kw)


@pytest.mark.parametrize("r, needles", [(600000, ("field 'r'", "600000")), (64, ("rank 64", "(rank 4)"))])
def test_adapter_whose_config_lies_about_its_rank_is_refused_before_allocating(tmp_path, r, needles):
    folder = _adapter(tmp_path / "lying", r=r)
    p = _owmi_with(f"embedded+peft:{folder}", tmp_path, timeout=240, address_space=8 * GIB)
    one_line(p, "lying", *needles)


def test_adapter_regex_target_modules_is_refused(tmp_path, tb):
    folder = _adapter(tmp_path / "regex", cfg={"target_modules": "(a+)+$"})
    one_line(tb(_owmi_argv(f"embedded+peft:{folder}", tmp_path), tmp_path), "target_modules",
             "regular expression", "list of module names")


def test_prompt_tuning_adapter_is_refused_up_front(tmp_path, tb):
    folder = _adapter(tmp_path / "pt", cfg={"peft_type": "PROMPT_TUNING", "num_virtual_tokens": 8})
    one_line(tb(_owmi_argv(f"embedded+peft:{folder}", tmp_path), tmp_path), "PROMPT_TUNING", "LoRA adapters only")


def test_sidecar_base_sha256_of_the_wrong_type_is_one_line(tmp_path, tb):
    folder = _adapter(tmp_path / "side")
    (folder / "tamperbench-adapter.json").write_text(json.dumps({"base_sha256": 12345}))
    one_line(tb(_owmi_argv(f"embedded+peft:{folder}", tmp_path), tmp_path), "base_sha256", "12345")


@pytest.mark.parametrize("name", ["adapter_config.json", "tamperbench-adapter.json"])
def test_sparse_gigabyte_adapter_configs_are_refused_unread(tmp_path, name):
    folder = _adapter(tmp_path / "big")
    with open(folder / name, "r+b" if (folder / name).exists() else "wb") as fh:
        fh.truncate(GIB)  # sparse: costs no disk, and reading it whole would cost gigabytes
    p = _owmi_with(f"embedded+peft:{folder}", tmp_path, timeout=240, address_space=4 * GIB)
    one_line(p, name, "over 1 MiB")


def test_sparse_gigabyte_sae_cfg_is_refused_unread(tmp_path):
    sae = tmp_path / "sae"
    sae.mkdir()
    (sae / "sae_weights.safetensors").write_bytes(b"")
    with open(sae / "cfg.json", "wb") as fh:
        fh.truncate(GIB)
    spec = {"objects": [{"kind": "sae_feature", "layer": 3, "feature": 0, "sae_path": str(sae)}],
            "operators": [{"name": "zero", "dose": 1.0}]}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    p = cli(["owmi", "run", "--config", "s.json", "--out", tmp_path / "run"], tmp_path, timeout=240,
            address_space=4 * GIB)
    one_line(p, "cfg.json", "over 1 MiB")


# --- model folders: refused before transformers prints anything (Low: stderr one line) -----------------

def _model_folder(tmp: Path, name: str) -> Path:
    from tamperbench.models.sources import resolve

    src = resolve("embedded")
    folder = tmp / name
    folder.mkdir()
    for f in src.load_dir.iterdir():
        if f.suffix != ".safetensors" and f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
    return folder


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_raw_pickle_bin_is_refused_in_one_line_and_nothing_runs(tmp_path, tb):
    import pickle

    folder = _model_folder(tmp_path, "pickled")
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"w": _Payload()}, protocol=4))
    one_line(tb(["sleight", "run", "--model", folder, "--out", tmp_path / "run"], tmp_path),
             "pytorch_model.bin", "raw pickle")
    assert not (tmp_path / "PWNED").exists()


def test_auto_map_folder_is_refused_in_one_line(tmp_path, tb):
    from safetensors.torch import save_file
    import torch

    folder = _model_folder(tmp_path, "custom")
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(model_type="evilmodel", auto_map={"AutoConfig": "evil.Cfg", "AutoModelForCausalLM": "evil.Model"})
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "evil.py").write_text("open('PWNED', 'w')\n")
    save_file({"x": torch.zeros(1)}, str(folder / "model.safetensors"))
    one_line(tb(["sleight", "run", "--model", folder, "--out", tmp_path / "run"], tmp_path),
             "auto_map", "evilmodel")
    assert not (tmp_path / "PWNED").exists()


# --- FIFOs and devices (Low) --------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["run-spec", "owmi-config", "model", "dev-zero", "run-spec-json"])
def test_fifos_and_devices_are_refused_without_hanging(tmp_path, where):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    argv = {"run-spec": ["run", fifo, "--out", tmp_path / "o"],
            "owmi-config": ["owmi", "run", "--config", fifo, "--out", tmp_path / "o"],
            "model": ["sleight", "run", "--model", fifo, "--out", tmp_path / "o"],
            "dev-zero": ["run", "/dev/zero", "--out", tmp_path / "o"],
            "run-spec-json": ["sleight", "run", "--preset", "quick", "--out", "RUN"]}[where]
    if where == "run-spec-json":  # a writer resuming RUN reads its spec.json first
        from tamperbench.sleight.synthetic import write_synthetic_run

        run = write_synthetic_run(tmp_path / "RUN")
        (run / "spec.json").unlink()
        os.mkfifo(run / "spec.json")
    line = one_line(cli(argv, tmp_path, timeout=60))
    assert "FIFO" in line or "character device" in line, line


# --- control characters (Low) --------------------------------------------------------------------------

def test_escape_codes_in_a_model_name_never_reach_the_terminal_raw(tmp_path, tb):
    evil = "x\x1b[2J\x1b[H\x1b]0;owned\x07\x9b31merror: all good\u202e.gguf"
    p = tb(["sleight", "run", "--model", evil, "--out", tmp_path / "run"], tmp_path)
    line = one_line(p, "\\x1b[2J", "\\x07", "\\x9b", "\\u202e")
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in line), repr(line)


def test_printable_keeps_text_and_escapes_controls():
    from tamperbench.errors import printable

    assert printable("caf\u00e9 a\tb\nc") == "caf\u00e9 a b c"
    assert printable("\x1b[31m\x7f\x85") == "\\x1b[31m\\x7f"  # \x85 (NEL) is whitespace: dropped at the end


# --- Medium 8 and the OWMI spec Low items -------------------------------------------------------------

def _owmi_spec(tb, tmp: Path, **over) -> subprocess.CompletedProcess:
    spec = {"objects": [{"kind": "resid_post", "layer": 3}], "operators": [{"name": "scale", "dose": 2.0}],
            "items_per_benchmark": 1, "probes": ["detection"], "conditions": ["intervention"], **over}
    (tmp / "s.json").write_text(json.dumps(spec))
    return tb(["owmi", "run", "--config", "s.json", "--out", tmp / "run"], tmp)


def test_a_position_beyond_any_context_is_refused_when_the_spec_is_read(tmp_path, tb):
    one_line(_owmi_spec(tb, tmp_path, positions="0,99999999"), "positions", "99999999")
    assert not (tmp_path / "run").exists()


def test_a_position_beyond_the_prompt_is_refused_before_compute(tmp_path, tb):
    p = _owmi_spec(tb, tmp_path, positions="0,5000")
    one_line(p, "positions", "5000", "beyond the prompt of item")
    from tamperbench.store import RunStore

    if (tmp_path / "run").exists():  # the store may be opened first; nothing was computed into it
        store = RunStore.open_existing(tmp_path / "run", read_only=True)
        try:
            assert all(store.count(t) == 0 for t in store.tables() if t.startswith("owmi"))
        finally:
            store.close()


@pytest.mark.parametrize("over, needle", [({"objects": []}, "objects"), ({"operators": []}, "operators"),
                                          ({"operators": [{"name": "add", "dose": 1e308}]}, "float32")])
def test_owmi_spec_empty_axes_and_huge_doses_are_refused(tmp_path, tb, over, needle):
    one_line(_owmi_spec(tb, tmp_path, **over), needle)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args, field", [(["--seed", str(2**70)], "--seed"), (["--l1", "inf"], "--l1"),
                                         (["--l1", "nan"], "--l1")])
def test_train_sae_ranges(tmp_path, tb, args, field):
    one_line(tb(["owmi", "train-sae", "--out", tmp_path / "sae", *args], tmp_path), field)
    assert not (tmp_path / "sae").exists()


def test_train_sae_learning_rate_must_be_finite():
    from pydantic import ValidationError

    from tamperbench.owmi.controls.sae_train import SaeTrainSpec

    with pytest.raises(ValidationError, match="finite"):
        SaeTrainSpec(learning_rate=float("inf"))


# --- Medium 3: gzip expansion -----------------------------------------------------------------------

def test_a_gzip_that_expands_past_the_cap_is_refused(tmp_path):
    from tamperbench.tasks.sources import MAX_TEXT_BYTES

    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as gz:
        block = b"\n" * (1 << 22)
        for _ in range(MAX_TEXT_BYTES // len(block) + 2):
            gz.write(block)
    assert bomb.stat().st_size < 2 << 20
    p = cli(["bench", "check", "humaneval", "--data", bomb], tmp_path, timeout=120, address_space=4 * GIB)
    one_line(p, "bomb.jsonl.gz", "decompressed")


# --- Medium 6: no predictable temporary names ------------------------------------------------------

def test_inspect_export_does_not_write_through_a_planted_partial_link(tmp_path):
    pytest.importorskip("inspect_ai")
    from tamperbench.inspect_ext.export import export_inspect
    from tamperbench.sleight.synthetic import write_synthetic_run

    run = write_synthetic_run(tmp_path / "run")
    target = tmp_path / "outside.txt"
    target.write_bytes(b"precious")
    out = tmp_path / "o" / "run.eval"
    out.parent.mkdir()
    (out.parent / f".{out.name}.partial{os.getpid()}{out.suffix}").symlink_to(target)
    export_inspect(run, out)
    assert target.read_bytes() == b"precious"
    assert out.is_file() and not out.is_symlink()


def test_inspect_export_of_a_spec_whose_models_is_not_a_list(tmp_path, tb):
    pytest.importorskip("inspect_ai")
    from tamperbench.sleight.synthetic import write_synthetic_run

    run = write_synthetic_run(tmp_path / "run")
    spec = json.loads((run / "spec.json").read_text())
    spec.pop("model", None)
    spec["models"] = 5
    (run / "spec.json").write_text(json.dumps(spec))
    p = tb(["export", run, "--format", "inspect", "--out", tmp_path / "o.eval"], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "o.eval").is_file()


def test_model_cache_manifest_is_not_written_through_a_planted_link(tmp_path):
    from tamperbench.models.provenance import sha256_file
    from tamperbench.models.sources import MANIFEST, _cache_ok

    folder = tmp_path / "cache"
    folder.mkdir()
    w = folder / "model.safetensors"
    w.write_bytes(b"weights")
    (folder / MANIFEST).write_text(json.dumps({"files": {w.name: {"size": 7, "mtime_ns": 1, "sha256": sha256_file(w)}}}))
    target = tmp_path / "outside.txt"
    target.write_bytes(b"precious")
    (folder / f"{MANIFEST}.tmp{os.getpid()}").symlink_to(target)
    assert _cache_ok(folder)  # verified, so the manifest is rewritten with the new mtime
    assert target.read_bytes() == b"precious"
    assert json.loads((folder / MANIFEST).read_text())["files"][w.name]["mtime_ns"] == w.stat().st_mtime_ns


def test_a_run_folder_name_with_markup_and_escapes_prints_inert(tmp_path, tb):
    from tamperbench.sleight.synthetic import write_synthetic_run

    run = write_synthetic_run(tmp_path / "run")
    out = tmp_path / "o[bold]x\x1b[2J"
    out.mkdir()
    p = tb(["export", run, "--format", "csv", "--out", out / "t.csv"], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "\x1b" not in p.stdout and "[bold]x\\x1b[2J" in p.stdout.replace("\n", ""), p.stdout
