"""``import tamperbench.stats`` exposes the public estimators (dprime, auroc, the bootstrap, TOST) with an ``__all__``."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import tamperbench.stats as stats


@pytest.mark.parametrize("name", stats.__all__)
def test_every_exported_name_is_the_submodule_object(name):
    module = importlib.import_module(f"tamperbench.stats.{stats._EXPORTS[name]}")
    assert getattr(stats, name) is getattr(module, name)


def test_the_estimators_users_ask_for_are_exported():
    for name in ("dprime", "auroc", "detection_bootstrap", "tost_pvalue", "equivalence_bound", "wilson"):
        assert name in stats.__all__
    assert stats.auroc([1.0, 0.9], [0.1, 0.2]) == 1.0
    from tamperbench.stats import dprime

    assert dprime([1, 1, 0, 1], [0, 0, 1, 0]) > 0


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_estimator"):
        stats.no_such_estimator  # noqa: B018


def test_importing_the_package_does_not_import_scipy():
    code = "import sys, tamperbench.stats; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
