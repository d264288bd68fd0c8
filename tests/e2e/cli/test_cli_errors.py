"""Bad input at the real command line: one stderr line naming the culprit, exit 2, no traceback.

A missing model path, a misspelled spec field and the torch-free refusals run ``python -m
tamperbench.cli`` in a subprocess; the other cases call the same entry point in-process
(``tb_inprocess``, tests/conftest.py), which checks the same message, status and stream."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TB = [sys.executable, "-m", "tamperbench.cli"]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run([*TB, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_model_path_that_does_not_exist(tmp_path):
    missing = tmp_path / "no-such-model"
    assert_one_line_error(run_cli("answer", "--model", str(missing)), str(missing), "does not exist")


def test_gguf_that_is_not_gguf(tmp_path, tb_inprocess):
    fake = tmp_path / "fake.gguf"
    fake.write_text("hello")
    assert_one_line_error(tb_inprocess("answer", "--model", str(fake)), "fake.gguf", "not a GGUF file")


def test_hub_id_while_offline(tmp_path, tb_inprocess):
    proc = tb_inprocess("answer", "--model", "nobody-here/no-such-model")
    assert_one_line_error(proc, "nobody-here/no-such-model", "local directory or .gguf path")


def test_bad_budget_names_the_flag(tb_inprocess):
    assert_one_line_error(tb_inprocess("answer", "--max-new-tokens", "0"), "--max-new-tokens")


def test_export_of_a_non_run(tmp_path, tb_inprocess):
    assert_one_line_error(tb_inprocess("export", str(tmp_path)), str(tmp_path), "not a tamperbench run directory")


@pytest.mark.parametrize("flag", ["--device"])
def test_unknown_device(flag, tb_inprocess):
    assert_one_line_error(tb_inprocess("answer", flag, "tpu"), "--device")


def test_spec_file_with_misspelled_field(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text('{"suite": "quote", "model": "embedded", "max_new_tokns": 12}')
    assert_one_line_error(run_cli("run", str(spec), "--out", str(tmp_path / "run")), "spec.json", "max_new_tokns")


def test_spec_file_with_wrongly_typed_field(tmp_path, tb_inprocess):
    spec = tmp_path / "spec.json"
    spec.write_text('{"suite": "quote", "model": "embedded", "max_new_tokens": "lots"}')
    assert_one_line_error(tb_inprocess("run", str(spec), "--out", str(tmp_path / "run")), "spec.json", "max_new_tokens")


def test_spec_file_with_unknown_suite(tmp_path, tb_inprocess):
    spec = tmp_path / "spec.json"
    spec.write_text('{"suite": "no-such-suite"}')  # (owmi, named here once, is a registered suite now)
    assert_one_line_error(tb_inprocess("run", str(spec), "--out", str(tmp_path / "run")), "field 'suite'",
                          "must be one of", "sleight", "no-such-suite")


def test_negative_batch_size(tb_inprocess):
    assert_one_line_error(tb_inprocess("quote", "run", "--out", "/tmp/never-written", "--batch-size", "-3"),
                          "--batch-size")


def test_bad_model_device_or_dtype_is_refused_before_torch_loads(tmp_path):
    """The refusals above come before the ~2 s torch + transformers import (loader.load_hf checks
    names and resolves the source first): a typo is answered at once."""
    (tmp_path / "fake.gguf").write_text("hello")
    code = textwrap.dedent("""
        import sys
        from tamperbench.cli import main
        for argv in (["--model", sys.argv[1]], ["--model", sys.argv[2]], ["--device", "tpu"], ["--dtype", "float8"]):
            sys.argv = ["tamperbench", "answer", *argv]
            try:
                main()
            except SystemExit as e:
                print(e.code, "torch" in sys.modules, "transformers" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "missing"), str(tmp_path / "fake.gguf")],
                          capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=300)
    assert proc.stdout.split("\n")[:4] == ["2 False False"] * 4, (proc.stdout, proc.stderr)
    errors = proc.stderr.splitlines()
    assert len(errors) == 4 and "does not exist" in errors[0] and "not a GGUF file" in errors[1], errors
    assert errors[2].startswith("error: --device") and errors[3].startswith("error: --dtype"), errors
