"""``tamperbench.specs`` (the old name of ``tamperbench.spec_base``) still imports, for one release:
the very same module, after a DeprecationWarning that names the new path. Run in a fresh interpreter,
so the warning is not swallowed by an earlier import in this process."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import warnings
warnings.simplefilter("error")
import tamperbench.spec_base as new
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as got:
    from tamperbench import specs
    from tamperbench.specs import FrozenSpec, load_spec_file
assert specs is new and FrozenSpec is new.FrozenSpec and load_spec_file is new.load_spec_file, specs
assert [w.category for w in got] == [DeprecationWarning], [str(w.message) for w in got]
assert "tamperbench.spec_base" in str(got[0].message), got[0].message
print("ok")
"""


def test_old_specs_path_is_the_spec_base_module_with_a_deprecation_warning():
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
