"""The suite registry: one place that says which suites exist and where each one's parts live.

WHY import strings: ``tamperbench --help`` must stay fast, so a suite is described by
``"module:attribute"`` strings and nothing of it (torch, its runner, its tables) is imported until
a command needs it. ``cli.py`` mounts each suite's typer sub-app, ``tamperbench run SPEC.json``
dispatches on the spec's ``suite`` field, and ``tamperbench report`` finds each run's section
builder, all through :func:`registered` -- so adding a suite never edits those core files.

Where suites come from, in order (a later one with the same name replaces an earlier one):

1. :data:`BUILTIN` below (the suites shipped with tamperbench);
2. the entry-point group ``tamperbench.suites`` of installed distributions (third-party suites);
   each entry point loads to a :class:`Suite` (or a list of them);
3. ``TAMPERBENCH_SUITES=module:attr,module:attr`` (a suite under development, or a test's toy
   suite, without reinstalling anything).

The parts a suite provides (each optional except ``cli``):

- ``cli``: a ``typer.Typer`` mounted as ``tamperbench NAME``;
- ``spec``: the frozen pydantic run spec (its ``suite`` field holds the suite's name);
- ``runner``: ``run(spec, out, *, new) -> object``, runs or resumes the spec into run dir ``out``;
- ``tables``: ``render(run_dir, console) -> None``, prints (and saves) the run's tables;
- ``report``: ``build_section(runs, writer) -> Section``, the suite's part of the static report site
  (:mod:`tamperbench.report.site`): leaderboard tables, figures and viewer pages;
- ``plan``: ``plan(spec, out, backend) -> estimate.Plan``, the run's pending work against run dir
  ``out`` (nothing created): what it will decode and prefill, what is stored already. ``--dry-run``
  (:func:`tamperbench.estimate.dry_run_spec`) calibrates on ``backend`` and prints it with an ETA;
- ``row_tokens``: ``row_tokens(spec, unit) -> int``, the row-token model: an upper bound on the
  tokens the decoder emits for one pending work unit (the suite's own unit: a question, a trial,
  a cell's item). The plan and the progress bars (:func:`tamperbench.progress.countdown`) count
  with it, so the bar counts down from the dry run's number;
- ``needs``: backend capability names (``ChatBackend``, ``ScoringBackend``, ``StepBackend``,
  ``HookBackend`` of :mod:`tamperbench.models.protocols`) the runner relies on;
- ``definition``: the suite's :class:`tamperbench.runs.driver.SuiteDef` (its spec, tables, plan,
  worker and hooks). ``tamperbench run`` and ``tamperbench sweep`` run a suite that has one through
  the run driver (executors, resume, ``--dry-run``, the bar); a suite with only a ``runner`` is
  called as before, in this process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from pydantic import BaseModel

from tamperbench.errors import UserError
from tamperbench.registry import Registry, load_object

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "ENV_VAR", "Suite", "get_suite", "load_object", "registered",
           "runnable_suite"]

ENTRY_POINT_GROUP = "tamperbench.suites"
ENV_VAR = "TAMPERBENCH_SUITES"


@dataclass(frozen=True)
class Suite:
    """Where one suite's parts live, as import strings (see the module docstring)."""

    name: str
    help: str
    cli: str
    spec: str | None = None
    runner: str | None = None
    tables: str | None = None
    report: str | None = None
    plan: str | None = None
    row_tokens: str | None = None
    needs: tuple[str, ...] = ()
    definition: str | None = None

    def part(self, which: str) -> Any:
        """Import one part (``"cli"``, ``"spec"``, ``"runner"``, ``"tables"``, ``"report"``, ``"plan"``,
        ``"row_tokens"``, ``"definition"``)."""
        ref = getattr(self, which)
        if ref is None:
            raise UserError(f"suite {self.name!r} has no {which}")
        return load_object(ref, f"suite {self.name!r} {which}")

    @property
    def runnable(self) -> bool:
        """True when ``tamperbench run SPEC.json`` can run this suite's specs."""
        return self.spec is not None and (self.runner is not None or self.definition is not None)

    def spec_model(self) -> type[BaseModel]:
        return self.part("spec")

    def run(self, spec: Any, out: Any, *, new: bool = False) -> Any:
        runner: Callable[..., Any] = self.part("runner")
        return runner(spec, out, new=new)

    def row_tokens_for(self, spec: Any, units: Any) -> int:
        """The decode bound of pending work ``units``: the sum of the registered row-token model over them
        (0 when the suite registers none)."""
        if self.row_tokens is None:
            return 0
        per_unit: Callable[[Any, Any], int] = self.part("row_tokens")
        return sum(int(per_unit(spec, u)) for u in units)

    def check_backend(self, backend: Any) -> None:
        """One-line error when ``backend`` lacks a capability this suite needs (names the capability
        and what to use instead; see :func:`tamperbench.models.protocols.require`)."""
        from tamperbench.models.protocols import Capability, require

        by_protocol = {c.protocol.__name__: c for c in Capability}
        for name in self.needs:
            if name in by_protocol:
                require(backend, by_protocol[name], needed_by=f"suite {self.name!r}")


BUILTIN: tuple[Suite, ...] = (
    Suite(name="owmi", help="OWMI: intervene on internal objects; can the model report it beyond controls?",
          cli="tamperbench.owmi.cli:app", spec="tamperbench.owmi.run.spec:OwmiSpec", runner="tamperbench.owmi.run.runner:run",
          tables="tamperbench.owmi.score.tables:render", report="tamperbench.owmi.score.site:build_section",
          plan="tamperbench.owmi.run.plan:run_plan", row_tokens="tamperbench.owmi.run.plan:unit_row_tokens",
          needs=("HookBackend", "ScoringBackend"), definition="tamperbench.owmi.run.runner:SUITE"),
    Suite(
        name="sleight",
        help="Sleight of Word: swap a trigger word in the model's own output.",
        cli="tamperbench.sleight.cli:app",
        spec="tamperbench.sleight.spec:SleightSpec",
        runner="tamperbench.sleight.runner:run",
        tables="tamperbench.sleight.cli:render_run",
        report="tamperbench.sleight.site:build_section",
        plan="tamperbench.sleight.plan:run_plan",
        row_tokens="tamperbench.sleight.plan:unit_row_tokens",
        needs=("ChatBackend",),  # step decoding when the backend offers it, else the black-box engine
        definition="tamperbench.sleight.runner:SUITE",
    ),
    Suite(
        name="judge",
        help="Judge jury: label tampered replies; agreement; human gold set.",
        cli="tamperbench.judge.cli:app",
        needs=("ChatBackend",),
    ),
    Suite(
        name="quote",
        help="Exact Words: copy one sentence verbatim; deterministic scorer.",
        cli="tamperbench.quote.cli:app",
        spec="tamperbench.quote.spec:QuoteRunSpec",
        runner="tamperbench.quote.runner:run",
        tables="tamperbench.quote.cli:render_run",
        report="tamperbench.quote.site:build_section",
        plan="tamperbench.quote.plan:run_plan",
        row_tokens="tamperbench.quote.plan:unit_row_tokens",
        needs=("ChatBackend",),
        definition="tamperbench.quote.runner:SUITE",
    ),
)


def _as_suites(obj: Any, where: str) -> list[tuple[str, Suite]]:
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    for item in items:
        if not isinstance(item, Suite):
            raise UserError(f"{where}: expected a tamperbench.suites.Suite, got {type(item).__name__}")
    return [(item.name, item) for item in items]


@lru_cache(maxsize=None)
def _registry(env: str) -> Registry[Suite]:
    reg: Registry[Suite] = Registry("suite")
    for suite in BUILTIN:
        reg.add(suite.name, suite)
    reg.add_entry_points(ENTRY_POINT_GROUP, _as_suites)
    reg.add_refs(filter(None, (r.strip() for r in env.split(","))), ENV_VAR, _as_suites)
    return reg


def registered() -> dict[str, Suite]:
    """Every known suite by name (built-in, entry points, ``TAMPERBENCH_SUITES``)."""
    return _registry(os.environ.get(ENV_VAR, "")).as_dict()


def get_suite(name: object, where: str = "suite") -> Suite:
    """The suite called ``name``; anything else is a UserError listing the registered ones."""
    return _registry(os.environ.get(ENV_VAR, "")).get(name, where)


def runnable_suite(name: object, where: str) -> Suite:
    """Like :func:`get_suite`, limited to suites that can run a spec file."""
    runnable = {n: s for n, s in registered().items() if s.runnable}
    if isinstance(name, str) and name in runnable:
        return runnable[name]
    raise UserError(f"{where}: must be one of {', '.join(sorted(runnable))}; got {name!r}")
