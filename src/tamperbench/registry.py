"""One registry primitive: named objects loaded lazily from ``"module:attr"`` references, from
installed distributions' entry points, and under aliases.

WHY lazy references: ``tamperbench --help`` must stay fast, so suites, model backends and executor
workers are named by ``"package.module:attribute"`` strings and imported only when a command needs
them. Every such reference goes through :func:`load_object`, so a bad one always reads the same way:
one line naming the reference and what is wrong with it (no colon, no such module, no such
attribute), raised as :class:`~tamperbench.errors.UserError` (exit 2 on the command line).

:class:`Registry` holds named entries (suites by name, backends by scheme), the aliases that lead to
them, and fills itself from an entry-point group or a list of references::

    reg: Registry[Suite] = Registry("suite")
    reg.add("quote", QUOTE, aliases=("exact-words",))
    reg.add_entry_points("tamperbench.suites", to_items)   # third-party packages
    reg.get("exact-words", "spec.json: field 'suite'")     # -> QUOTE; unknown names are one line
"""

from __future__ import annotations

import importlib
import warnings
from importlib.metadata import entry_points
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

from tamperbench.errors import UserError

__all__ = ["Registry", "entry_point_objects", "load_object"]

T = TypeVar("T")


def load_object(ref: object, what: str = "object") -> Any:
    """Import ``"package.module:attr"`` (``attr`` may be dotted) and return the attribute.

    A malformed reference, a missing module or a missing attribute is a one-line UserError that
    starts with ``what`` and names ``ref``. A module that exists but fails to import because one of
    ITS dependencies is missing re-raises that error unchanged: that is the real problem to show."""
    if not isinstance(ref, str):
        raise UserError(f"{what} {ref!r}: expected 'module:attribute'")
    module_name, sep, attr = ref.strip().partition(":")
    if not sep or not module_name or not attr or ":" in attr:
        raise UserError(f"{what} {ref!r}: expected 'module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):
            raise UserError(f"{what} {ref!r}: module {module_name!r} not found") from None
        raise
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UserError(f"{what} {ref!r}: {module_name} has no attribute {attr!r}") from None
    return obj


def entry_point_objects(group: str) -> list[tuple[str, str, Any]]:
    """``(name, value, loaded object)`` for every entry point of ``group`` in the installed
    distributions; one that cannot load is a one-line UserError naming the entry point."""
    found: list[tuple[str, str, Any]] = []
    for ep in entry_points(group=group):
        try:
            obj = ep.load()
        except (ImportError, AttributeError) as err:
            raise UserError(f"entry point {ep.name!r} ({ep.value}) in group {group!r}: {err}") from None
        found.append((ep.name, ep.value, obj))
    return found


class Registry(Generic[T]):
    """Entries of one kind by name, with aliases; a later entry of the same name replaces an earlier one."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._aliases: dict[str, tuple[str, bool]] = {}  # alias -> (name, deprecated)

    def add(self, name: str, item: T, *, aliases: Iterable[str] = ()) -> None:
        self._items[name] = item
        self._aliases.pop(name, None)
        for alias in aliases:
            self.alias(alias, name)

    def alias(self, alias: str, name: str, *, deprecated: bool = False) -> None:
        """Let ``alias`` lead to ``name``; a ``deprecated`` alias warns (DeprecationWarning) when used."""
        self._aliases[alias] = (name, deprecated)

    def resolve(self, name: object) -> str | None:
        """The registered name ``name`` stands for (itself or through an alias), else None."""
        if not isinstance(name, str):
            return None
        if name in self._items:
            return name
        target, deprecated = self._aliases.get(name, (None, False))
        if target is None or target not in self._items:
            return None
        if deprecated:
            warnings.warn(f"{self.kind} {name!r} is deprecated; use {target!r}", DeprecationWarning, stacklevel=3)
        return target

    def get(self, name: object, where: str | None = None) -> T:
        """The entry ``name`` names; anything else is one line listing the registered names."""
        found = self.resolve(name)
        if found is None:
            raise UserError(f"{where or self.kind}: must be one of {', '.join(sorted(self._items))}; got {name!r}")
        return self._items[found]

    def add_entry_points(self, group: str, convert: Callable[[Any, str], Iterable[tuple[str, T]]]) -> None:
        """Add what each entry point of ``group`` loads to, through ``convert(obj, where)`` -> (name, item)s."""
        for name, value, obj in entry_point_objects(group):
            for key, item in convert(obj, f"entry point {name!r} ({value})"):
                self.add(key, item)

    def add_refs(self, refs: Iterable[str], what: str, convert: Callable[[Any, str], Iterable[tuple[str, T]]]) -> None:
        """Add what each ``"module:attr"`` reference loads to, through ``convert`` as above."""
        for ref in refs:
            for key, item in convert(load_object(ref, what), f"{what} {ref!r}"):
                self.add(key, item)

    def as_dict(self) -> dict[str, T]:
        return dict(self._items)

    def __contains__(self, name: object) -> bool:
        return self.resolve(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
