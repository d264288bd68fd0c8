"""tamperbench inside inspect-ai (the ``inspect`` extra): tasks, scorers and run export.

- ``inspect eval tamperbench/exact_words --model PROVIDER/MODEL``: Exact Words as an inspect task,
  scored by tamperbench's deterministic scorer (:mod:`tamperbench.inspect_ext.tasks`);
- ``tamperbench.inspect_ext.scorers.sleight_jury``: the Sleight of Word jury as an inspect scorer on
  any sample (the question and the reply in, the four labels out, majority rule);
- ``tamperbench export RUN --format inspect --out FILE.eval``: a run as an inspect log, written with
  inspect's own log API, so ``inspect view`` opens it (:mod:`tamperbench.inspect_ext.export`).

inspect finds the tasks and scorers through the ``inspect_ai`` entry point in ``pyproject.toml``
(``_registry.py``). Nothing here is imported by the rest of tamperbench unless asked for.
"""

from __future__ import annotations

from tamperbench.errors import UserError

INSTALL_HINT = "pip install 'tamperbench[inspect]'"


def require_inspect() -> None:
    """One line naming the extra when inspect-ai is not installed."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise UserError(f"inspect-ai is not installed; {INSTALL_HINT}") from None
