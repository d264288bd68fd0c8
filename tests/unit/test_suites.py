"""The suite registry in-process: built-ins, TAMPERBENCH_SUITES, one-line errors, capability checks."""

from __future__ import annotations

import sys
import types

import pytest

from tamperbench.errors import UserError
from tamperbench.suites import ENV_VAR, Suite, get_suite, load_object, registered, runnable_suite


def test_builtins_are_registered_with_importable_parts():
    suites = registered()
    assert {"sleight", "quote", "judge"} <= set(suites)
    for suite in suites.values():
        for part in ("cli", "spec", "runner", "tables", "report"):
            if getattr(suite, part) is not None and suite.cli.startswith("tamperbench."):
                assert suite.part(part) is not None, (suite.name, part)
    assert runnable_suite("sleight", "x").spec_model().__name__ == "SleightSpec"
    with pytest.raises(UserError, match="x: must be one of .*quote.*sleight.*; got 'judge'"):
        runnable_suite("judge", "x")  # the judge runs on a sleight run, not from a spec file


def test_unknown_suite_and_bad_references_are_one_line():
    with pytest.raises(UserError, match=r"field 'suite': must be one of .*sleight.*; got None"):
        get_suite(None, "spec.json: field 'suite'")
    with pytest.raises(UserError, match="expected 'module:attribute'"):
        load_object("no_colon")
    with pytest.raises(UserError, match="module 'tamperbench.nope' not found"):
        load_object("tamperbench.nope:x")
    with pytest.raises(UserError, match="has no attribute 'nope'"):
        load_object("tamperbench.suites:nope")


def test_env_var_adds_and_replaces_suites(monkeypatch):
    mod = types.ModuleType("toy_registry_mod")
    mod.TOY = Suite(name="toy", help="a toy", cli="toy_registry_mod:app")
    mod.TWO = [Suite(name="toy2", help="b", cli="x:y"), Suite(name="quote", help="replaced", cli="x:y")]
    mod.BAD = object()
    monkeypatch.setitem(sys.modules, "toy_registry_mod", mod)
    monkeypatch.setenv(ENV_VAR, "toy_registry_mod:TOY, toy_registry_mod:TWO")
    suites = registered()
    assert suites["toy"] is mod.TOY and suites["quote"].help == "replaced" and "sleight" in suites
    monkeypatch.setenv(ENV_VAR, "toy_registry_mod:BAD")
    with pytest.raises(UserError, match="expected a tamperbench.suites.Suite, got object"):
        registered()
    monkeypatch.delenv(ENV_VAR)
    assert "toy" not in registered() and registered()["quote"].help != "replaced"


class _ChatOnly:
    """A backend offering chat generation only (the shape of an API client); no step decoder, no hooks."""

    provenance = types.SimpleNamespace(source="openai:toy")
    max_context = 4096
    provenance_id = "p"

    def chat_ids(self, messages, *, system=None, template_kwargs=None):
        return []

    def chat_text(self, messages, *, system=None, template_kwargs=None):
        return ""

    def generate_chat(self, conversations, **kw):
        return []

    def decode(self, ids, *, skip_special_tokens=True):
        return ""

    def encode(self, text):
        return []


def test_capability_check_names_what_is_missing():
    Suite(name="chatty", help="", cli="x:y", needs=("ChatBackend",)).check_backend(_ChatOnly())
    hooks = Suite(name="owmi-like", help="", cli="x:y", needs=("ChatBackend", "HookBackend"))
    with pytest.raises(UserError, match="suite 'owmi-like' needs hooks and activation capture; "
                                        "backend openai:toy offers chat generation only"):
        hooks.check_backend(_ChatOnly())
