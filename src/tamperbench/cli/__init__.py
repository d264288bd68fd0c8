"""The command line: the ``tamperbench`` root command and what only it uses.

Modules, one job each:

* ``root``        the root typer app: ``run``, ``export``, ``report``, ``answer``, ``demo``; mounts every
                  suite's sub-app, ``models``, ``bench`` and ``serve``; ``main`` is the console entry point
* ``options``     the typer option types every model-running command shares (suites' CLIs use them too)
* ``models``      ``tamperbench models list|install``
* ``answer``      the ``answer`` command's per-token table
* ``demo``, ``demo_steps``  ``tamperbench demo``: the main job on the embedded model, step by step

``tamperbench.cli:main`` (the console script) and ``tamperbench.cli:app`` are read lazily from ``root``,
so a suite's CLI can import :mod:`tamperbench.cli.options` without building the root app.
"""

from __future__ import annotations

from typing import Any

__all__ = ["app", "console", "main"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tamperbench.cli import root

        return getattr(root, name)
    raise AttributeError(f"module 'tamperbench.cli' has no attribute {name!r}")
