"""Deprecated name of :mod:`tamperbench.tasks` (the benchmark task adapters), kept for one release.

``import tamperbench.bench`` and any ``tamperbench.bench.X`` path (in code, or as a ``module:attr``
reference in a spec or ``TAMPERBENCH_SUITES``) give the very module ``tamperbench.tasks.X``, after one
DeprecationWarning. The ``tamperbench bench`` command and the ``$TAMPERBENCH_HOME/bench/`` data folder
keep their names: only the Python package was renamed, away from ``benchmarks/`` (the speed scripts).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

OLD, NEW = "tamperbench.bench", "tamperbench.tasks"

warnings.warn(f"{OLD} is deprecated; import {NEW}", DeprecationWarning, stacklevel=2)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``tamperbench.bench.X`` as the module object ``tamperbench.tasks.X`` (same classes, same state)."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(OLD + "."):
            return None
        new = NEW + fullname[len(OLD):]
        if importlib.util.find_spec(new) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(NEW + spec.name[len(OLD):])

    def exec_module(self, module: ModuleType) -> None:
        return None  # the tamperbench.tasks module is already executed


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())


def __getattr__(name: str) -> object:
    return getattr(importlib.import_module(NEW), name)
