"""tools/install.py (``make install``, ``make install-test``): pip's index settings reach uv, which does not
read pip's configuration. Run on the real ``pip config list`` of this interpreter, with a pip.conf and
PIP_* variables made here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _install():
    spec = importlib.util.spec_from_file_location("tb_install", ROOT / "tools" / "install.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pairs(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def test_pip_settings_become_uv_options(tmp_path, monkeypatch):
    inst = _install()
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://example.invalid/simple\n"
                    "extra-index-url = file:///a/simple file:///b/simple\nfind-links = /from/the/file\n"
                    f"constraint = {tmp_path / 'c.txt'}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))  # the environment wins over the file, as in pip
    monkeypatch.setenv("PIP_CERT", str(tmp_path / "ca.pem"))
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "77")
    args, env = inst.uv_options(inst.pip_config(sys.executable))
    assert _pairs(args, "--index-url") == ["https://example.invalid/simple"]
    assert _pairs(args, "--extra-index-url") == ["file:///a/simple", "file:///b/simple"]
    assert _pairs(args, "--find-links") == [str(tmp_path / "wheels")]
    assert _pairs(args, "--constraint") == [str(tmp_path / "c.txt")]
    # several sources: the best version across all of them, as pip picks (torch's +cpu build from find-links)
    assert _pairs(args, "--index-strategy") == ["unsafe-best-match"]
    assert env == {"SSL_CERT_FILE": str(tmp_path / "ca.pem"), "UV_HTTP_TIMEOUT": "77"}


def test_no_settings_no_options():
    inst = _install()
    assert inst.uv_options({}) == ([], {})
    args, _ = inst.uv_options({"index-url": "https://mirror.invalid/simple"})
    assert args == ["--index-url", "https://mirror.invalid/simple"], "one index: uv's own default strategy"


def test_a_bad_level_is_one_usage_line(capsys):
    assert _install().main(["everything"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage: python tools/install.py {demo,test}" in err
