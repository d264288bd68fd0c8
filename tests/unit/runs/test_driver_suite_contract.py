"""One suite contract: every suite package has the same modules for the same roles, and exposes its
suite definition (a ``runs.driver.SuiteDef`` in ``runner.py``) registered under its name, with its run spec
in ``spec.py`` and its plan in ``plan.py``. The jury (``judge``) is a service, not a suite (docs/architecture.md):
it has no spec file and no run directory of its own."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import tamperbench
from tamperbench.runs.driver import SuiteDef
from tamperbench.suites import BUILTIN, get_suite

ROLES = ("spec", "plan", "tables", "cli", "site", "runner")
SUITES = ["sleight", "quote", "owmi"]


def test_every_builtin_suite_with_a_spec_is_checked_here():
    assert {s.name for s in BUILTIN if s.spec is not None} == {"sleight", "quote", "owmi"}


def _role_modules(package: Path, role: str) -> list[Path]:
    """Where a role's module may be: at the suite's top (``spec.py`` or ``spec/``), or in one of its phase
    packages (``run/spec.py``: a suite cut by phase, as OWMI is)."""
    found = [package / f"{role}.py", package / role / "__init__.py", *package.glob(f"*/{role}.py")]
    return [p for p in found if p.is_file()]


@pytest.mark.parametrize("name", SUITES)
def test_suite_has_the_contract_modules_and_exposes_its_definition(name):
    package = Path(tamperbench.__file__).parent / name
    missing = [r for r in ROLES if not _role_modules(package, r)]
    assert not missing, f"tamperbench.{name} lacks {', '.join(f'{m}.py' for m in missing)}"
    registered = get_suite(name)
    assert registered.definition is not None, f"suite {name!r} registers no definition"
    module, _, attr = registered.definition.partition(":")
    assert module.startswith(f"tamperbench.{name}.") and module.endswith(".runner") and attr == "SUITE"
    definition = registered.part("definition")
    assert isinstance(definition, SuiteDef) and definition.name == name
    assert importlib.import_module(module).SUITE is definition
    # the spec comes from a spec module, the dry-run plan from a plan module, and the registry names the same spec
    assert definition.spec.__module__.startswith(f"tamperbench.{name}.") and definition.spec.__module__.endswith(".spec")
    assert definition.estimate is not None and definition.estimate.__module__.endswith(".plan")
    assert registered.spec_model() is definition.spec


def test_the_jury_is_a_service_not_a_suite():
    judge = get_suite("judge")
    assert judge.spec is None and judge.definition is None and not judge.runnable


def test_old_import_paths_of_the_moved_specs_keep_working():
    """``sleight/presets.py`` -> ``sleight/spec.py`` + ``sleight/protocol.py`` (a deprecation warning for one
    release); ``QuoteRunSpec`` and the plan's names stay importable from ``quote/runner.py``."""
    import sys
    import warnings

    sys.modules.pop("tamperbench.sleight.presets", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from tamperbench.sleight import presets
    assert any(issubclass(w.category, DeprecationWarning) and "tamperbench.sleight.spec" in str(w.message)
               for w in caught)
    from tamperbench.sleight import protocol, spec

    assert presets.build_spec is spec.build_spec and presets.SleightSpec is spec.SleightSpec
    assert presets.get_preset is protocol.get_preset and presets.protocol_words is protocol.protocol_words
    from tamperbench.quote import plan as quote_plan
    from tamperbench.quote import runner as quote_runner
    from tamperbench.quote import spec as quote_spec

    assert quote_runner.QuoteRunSpec is quote_spec.QuoteRunSpec and quote_runner.data_sha256 is quote_spec.data_sha256
    assert quote_runner.build_trials is quote_plan.build_trials and quote_runner.TABLE == "quote_trials"
