"""Run specs: frozen pydantic models, validated strictly, saved with every run.

A misspelled field in a spec file must not be silently ignored (a typo in ``max_new_tokens``
would quietly run the default), so every spec forbids extra fields, and validation errors are
turned into one line that names the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from tamperbench.errors import UserError

S = TypeVar("S", bound=BaseModel)

# Bounds of every numeric spec field. WHY: a spec is input; an unbounded number reaches torch or C
# (``manual_seed(2**70)`` overflows, ``max_new_tokens`` 10**400 or a temperature of Infinity crash a
# run as a "bug" after its directory exists) or memory (``repeats`` 10**7 builds ten million trials
# before the first token). Each bound is one line naming the field, before any run directory exists.
SEED_MAX = 2**32 - 1  # numpy's legacy limit; derived seeds (seed * 1_000_003 + i) stay inside int64
MAX_NEW_TOKENS = 1 << 20  # beyond any context window; the context check refuses more than the model holds
MAX_REPEATS = 1000
MAX_BATCH = 1 << 16
SPEC_FILE_MAX_BYTES = 8 << 20  # a spec file (or a run's spec.json) larger than this is refused unread

Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
NewTokens = Annotated[int, Field(ge=1, le=MAX_NEW_TOKENS)]
Temperature = Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)]
Repeats = Annotated[int, Field(ge=1, le=MAX_REPEATS)]
BatchSize = Annotated[int, Field(ge=1, le=MAX_BATCH)]


class FrozenSpec(BaseModel):
    """Base for run specs: immutable, extra fields forbidden, constraints declared on the fields.

    ``cli_flags`` maps a field to the command-line option that sets it when the two names differ
    (``item_ids`` -> ``--items``), so an error from a command names the option the user typed,
    and an error from a spec file names the field.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    cli_flags: ClassVar[dict[str, str]] = {}

    @classmethod
    def stored_defaults(cls, stored: dict) -> dict[str, Any]:
        """What a field added to the class after ``stored`` (a run's frozen spec) was written reads as in it:
        the field's default, unless a suite says the old behaviour was another value (Exact Words'
        ``sample_seed``: runs sampled before it existed seeded by position)."""
        return {k: f.default for k, f in cls.model_fields.items() if k not in stored and not f.is_required()}


def _field_of(first: ErrorDetails) -> str:
    return ".".join(str(p) for p in first["loc"]) or "(top level)"


def _extra(err: ValidationError) -> str:
    return f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""


def describe_validation_error(err: ValidationError, where: str) -> str:
    """First problem of a pydantic error as ``where: field 'a.b': message``."""
    first = err.errors()[0]
    return f"{where}: field '{_field_of(first)}': {first['msg']}{_extra(err)}"


def describe_flag_error(err: ValidationError, cls: type[BaseModel]) -> str:
    """First problem of a pydantic error as ``--option: message, got VALUE`` (for CLI commands)."""
    first = err.errors()[0]
    name = str(first["loc"][0]) if first["loc"] else ""
    flags: dict[str, str] = getattr(cls, "cli_flags", {})
    flag = flags.get(name, "--" + name.replace("_", "-")) if name else cls.__name__
    shown = repr(first.get("input"))
    shown = shown if len(shown) <= 60 else f"{shown[:40]}... ({len(shown)} characters)"
    got = f", got {shown}" if name and not isinstance(first.get("input"), dict) else ""
    return f"{flag}: {first['msg'].removeprefix('Value error, ')}{got}{_extra(err)}"


def build_spec(cls: type[S], where: str | None = None, **values: Any) -> S:
    """Validate spec values; on failure one line naming ``where``'s field, or the CLI option when
    ``where`` is None (values came from command-line flags)."""
    try:
        return cls(**values)
    except ValidationError as err:
        msg = describe_flag_error(err, cls) if where is None else describe_validation_error(err, where)
        raise UserError(msg) from None


def read_spec_json(path: Path) -> dict:
    """The JSON object in a spec file; a missing file, bad JSON or a non-object is one line."""
    try:
        from tamperbench.safeio.files import read_capped

        data = json.loads(read_capped(path, SPEC_FILE_MAX_BYTES, "spec file").decode("utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: spec file does not exist") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read spec file ({err})") from None
    except ValueError as err:
        raise UserError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a spec file must hold a JSON object")
    return data


def load_spec_file(path: Path, cls: type[S]) -> S:
    """Read a JSON spec file into ``cls``; any problem becomes one line naming the file and field."""
    data = read_spec_json(path)
    unknown = sorted(set(data) - set(cls.model_fields))
    if unknown:  # checked here too, so suite specs that allow extras are still strict when read from a file
        raise UserError(f"{path}: field '{unknown[0]}': not a field of a {cls.__name__} "
                        f"(known: {', '.join(cls.model_fields)})")
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise UserError(describe_validation_error(err, str(path))) from None
