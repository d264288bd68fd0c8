"""The one registry primitive: lazy ``module:attr`` references, entry points, aliases, one-line errors.

The entry point is real: a ``*.dist-info`` folder with ``entry_points.txt`` on ``sys.path``, found by
importlib.metadata the way an installed third-party package is found.
"""

from __future__ import annotations

import sys
import textwrap

import pytest

from tamperbench.errors import UserError
from tamperbench.registry import Registry, entry_point_objects, load_object


def test_a_good_reference_loads_its_attribute_dotted_too():
    assert load_object("tamperbench.errors:UserError") is UserError
    assert load_object("tamperbench.registry:Registry.get") is Registry.get


@pytest.mark.parametrize(("ref", "line"), [
    ("no_colon", "suite part 'no_colon': expected 'module:attribute'"),
    (":attr", "suite part ':attr': expected 'module:attribute'"),
    ("tamperbench.errors:", "suite part 'tamperbench.errors:': expected 'module:attribute'"),
    ("a:b:c", "suite part 'a:b:c': expected 'module:attribute'"),
    (None, "suite part None: expected 'module:attribute'"),
    ("tamperbench.nope:x", "suite part 'tamperbench.nope:x': module 'tamperbench.nope' not found"),
    ("tamperbench.errors:Nope", "suite part 'tamperbench.errors:Nope': tamperbench.errors has no attribute 'Nope'"),
    ("tamperbench.errors:UserError.nope",
     "suite part 'tamperbench.errors:UserError.nope': tamperbench.errors has no attribute 'UserError.nope'"),
])
def test_each_bad_reference_is_one_line_naming_it(ref, line):
    with pytest.raises(UserError) as err:
        load_object(ref, "suite part")
    assert str(err.value) == line and "\n" not in str(err.value)


def test_a_module_whose_own_dependency_is_missing_shows_that_dependency(tmp_path, monkeypatch):
    (tmp_path / "needs_ghost_dep.py").write_text("import ghost_dependency_xyz\nX = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="ghost_dependency_xyz"):
        load_object("needs_ghost_dep:X")


def _install_entry_points(tmp_path, monkeypatch, body: str) -> None:
    dist = tmp_path / "toyplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent(body))
    (tmp_path / "toyplugin_mod.py").write_text("THING = {'kind': 'toy'}\nOTHER = {'kind': 'other'}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toyplugin_mod", raising=False)


def test_an_entry_point_adds_its_object(tmp_path, monkeypatch):
    _install_entry_points(tmp_path, monkeypatch, """
        [tamperbench.test_things]
        toy = toyplugin_mod:THING
    """)
    assert [(n, v) for n, v, _ in entry_point_objects("tamperbench.test_things")] == [("toy", "toyplugin_mod:THING")]
    reg: Registry[dict] = Registry("thing")
    reg.add("builtin", {"kind": "builtin"})
    reg.add_entry_points("tamperbench.test_things", lambda obj, where: [(obj["kind"], obj)])
    assert reg.get("toy") == {"kind": "toy"} and sorted(reg) == ["builtin", "toy"]


def test_an_entry_point_that_cannot_load_is_one_line(tmp_path, monkeypatch):
    _install_entry_points(tmp_path, monkeypatch, """
        [tamperbench.test_things]
        broken = toyplugin_mod:MISSING
    """)
    with pytest.raises(UserError) as err:
        entry_point_objects("tamperbench.test_things")
    assert str(err.value).startswith("entry point 'broken' (toyplugin_mod:MISSING) in group 'tamperbench.test_things': ")
    assert "\n" not in str(err.value)


def test_an_alias_leads_to_its_entry_and_a_deprecated_one_warns():
    reg: Registry[str] = Registry("suite")
    reg.add("quote", "QUOTE", aliases=("exact-words",))
    reg.alias("old-quote", "quote", deprecated=True)
    assert reg.get("exact-words") == "QUOTE" and "exact-words" in reg and list(reg) == ["quote"]
    with pytest.warns(DeprecationWarning, match="suite 'old-quote' is deprecated; use 'quote'"):
        assert reg.get("old-quote") == "QUOTE"
    reg.alias("dangling", "nowhere")
    with pytest.raises(UserError, match=r"^spec.json: field 'suite': must be one of quote; got 'dangling'$"):
        reg.get("dangling", "spec.json: field 'suite'")
    reg.add("quote", "QUOTE2")  # a later entry replaces an earlier one; its aliases stay
    assert reg.get("exact-words") == "QUOTE2"


def test_references_from_a_list_use_the_same_loader(monkeypatch):
    reg: Registry[object] = Registry("suite")
    reg.add_refs(["tamperbench.errors:UserError"], "TAMPERBENCH_SUITES", lambda obj, where: [("err", obj)])
    assert reg.get("err") is UserError
    with pytest.raises(UserError, match=r"^TAMPERBENCH_SUITES 'tamperbench.nope:x': module 'tamperbench.nope' not found$"):
        reg.add_refs(["tamperbench.nope:x"], "TAMPERBENCH_SUITES", lambda obj, where: [])
