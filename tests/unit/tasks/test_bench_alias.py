"""The old package name ``tamperbench.bench`` keeps working for one release: the very modules of
``tamperbench.tasks``, after one DeprecationWarning. Each check runs in a fresh interpreter, because
the warning fires once per process, when the old name is first imported."""

from __future__ import annotations

import subprocess
import sys

CODE = r"""
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as seen:
    from tamperbench.bench.schema import BenchItem
    from tamperbench.bench.scoring.score import score
    import tamperbench.bench.load as old_load
    from tamperbench.registry import load_object
    via_ref = load_object("tamperbench.bench.load:load", "spec field 'items'")
import tamperbench.tasks.load as new_load
import tamperbench.tasks.schema as new_schema
import tamperbench.tasks.scoring.score as new_score
assert BenchItem is new_schema.BenchItem and score is new_score.score
assert old_load is new_load and via_ref is new_load.load
deprecations = [str(w.message) for w in seen if issubclass(w.category, DeprecationWarning)]
assert deprecations == ["tamperbench.bench is deprecated; import tamperbench.tasks"], deprecations
try:
    import tamperbench.bench.no_such_module
except ModuleNotFoundError as err:
    assert err.name == "tamperbench.bench.no_such_module", err.name
else:
    raise AssertionError("a missing module imported")
print("ok")
"""


def test_old_package_name_is_the_same_modules_with_one_warning():
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_new_name_imports_without_a_warning():
    code = "import tamperbench.tasks.load, tamperbench.tasks.scoring.score, tamperbench.cli.root; print('ok')"
    proc = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
