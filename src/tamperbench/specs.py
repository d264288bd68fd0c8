"""Deprecated name of :mod:`tamperbench.spec_base` (the base every suite's run spec builds on), kept
for one release: ``import tamperbench.specs`` gives the very module ``tamperbench.spec_base`` (same
classes, same state), after one DeprecationWarning. Renamed because ``specs`` beside each suite's own
``spec`` module (``owmi/run/spec.py``, ``quote/spec.py``, ...) read as a second home of those specs."""

from __future__ import annotations

import importlib
import sys
import warnings

warnings.warn("tamperbench.specs moved to tamperbench.spec_base; the old path is removed in the next release",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = importlib.import_module("tamperbench.spec_base")
