"""``tamperbench sweep SWEEP.json --out DIR``: one command runs a suite over a list of models.

A sweep file names a suite, the models, and the rest of that suite's run spec::

    {"suite": "sleight", "models": ["embedded", "/models/qwen2.5-7b"], "spec": {"preset": "quick", ...}}

Each model gets its own run directory under ``DIR`` (named from the model spec), so every run stays
resumable on its own: rerunning the sweep skips finished trials of every model. With
``--executor ray`` each model's work units are spread over Ray actors (one model per worker or GPU);
the driver alone writes each store.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tamperbench.errors import UserError

MAX_MODELS = 1000


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str
    models: list[str] = Field(min_length=1, max_length=MAX_MODELS)
    spec: dict[str, Any] = Field(default_factory=dict)


def run_dir_name(model: str) -> str:
    """A folder name for a model spec: readable, no path separators, never empty or hidden."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._") or "model"
    return name[:120]


def load_sweep(path: Path) -> SweepSpec:
    from tamperbench.safeio.files import read_capped
    from tamperbench.spec_base import SPEC_FILE_MAX_BYTES

    try:
        data = json.loads(read_capped(Path(path), SPEC_FILE_MAX_BYTES, "sweep file").decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UserError(f"{path}: not a readable JSON sweep file ({err})") from None
    try:
        sweep = SweepSpec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UserError(f"{path}: field '{loc}': {first['msg']}") from None
    if "model" in sweep.spec:
        raise UserError(f"{path}: field 'spec.model': give the models in 'models', not in 'spec'")
    names = [run_dir_name(m) for m in sweep.models]
    if len(set(names)) != len(names):
        raise UserError(f"{path}: field 'models': two models map to the same run folder name")
    return sweep


def build_specs(sweep: SweepSpec, where: str) -> list[tuple[str, BaseModel]]:
    """Validate every model's run spec before anything runs (a typo fails the whole sweep up front)."""
    from tamperbench.suites import runnable_suite

    suite = runnable_suite(sweep.suite, f"{where}: field 'suite'")
    cls = suite.spec_model()
    out = []
    for m in sweep.models:
        try:
            spec = cls.model_validate({"suite": sweep.suite, **sweep.spec, "model": m})
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise UserError(f"{where}: field 'spec.{loc}': {first['msg']} (model {m})") from None
        out.append((m, spec))
    return out


def run_sweep(path: Path, out: Path, *, executor=None, new: bool = False) -> list[tuple[str, Path]]:
    """Validate every model's spec, then run each through the run driver (runs/driver.py) into its folder."""
    from tamperbench.runs.driver import run_registered
    from tamperbench.suites import runnable_suite

    sweep = load_sweep(path)
    specs = build_specs(sweep, str(path))
    suite = runnable_suite(sweep.suite, f"{path}: field 'suite'")
    done = []
    for model, spec in specs:
        run_dir = Path(out) / run_dir_name(model)
        run_registered(suite, spec, run_dir, new=new, executor=executor)
        done.append((model, run_dir))
    return done
