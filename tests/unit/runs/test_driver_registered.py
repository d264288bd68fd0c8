"""``run_registered`` (what ``tamperbench run`` and ``tamperbench sweep`` call): a suite registered with only a
``runner`` function (a third-party suite written before the driver, or OWMI until its port) is called as
before, and refuses an executor in one line instead of failing on the runner's signature."""

from __future__ import annotations

import sys

import pytest

from tamperbench.errors import UserError
from tamperbench.runs.driver import definition, run_registered
from tamperbench.suites import Suite

CALLS: list[tuple] = []


def legacy_run(spec, out, *, new=False):
    CALLS.append((spec, out, new))
    return "ran"


LEGACY = Suite(name="legacy", help="", cli="typer:Typer", spec="pydantic:BaseModel", runner=f"{__name__}:legacy_run")


def test_a_runner_only_suite_runs_as_before_and_refuses_an_executor(tmp_path):
    assert sys.modules[__name__].legacy_run is legacy_run and definition(LEGACY) is None
    assert run_registered(LEGACY, "spec", tmp_path, new=True) == "ran" and CALLS == [("spec", tmp_path, True)]
    with pytest.raises(UserError, match="^--executor: suite 'legacy' runs in-process only$"):
        run_registered(LEGACY, "spec", tmp_path, executor=object())  # type: ignore[arg-type]
    assert len(CALLS) == 1


def test_a_definition_that_is_not_a_suitedef_is_one_line():
    bad = Suite(name="bad", help="", cli="typer:Typer", spec="pydantic:BaseModel", definition=f"{__name__}:LEGACY")
    with pytest.raises(UserError, match="suite 'bad' definition: expected a tamperbench.runs.driver.SuiteDef, got Suite"):
        definition(bad)
