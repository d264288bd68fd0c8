"""Is a run directory's stored spec the spec asked for? The check :class:`~tamperbench.store.RunStore` runs before
it opens a run to resume it, with what a field added to a spec class later reads as in an older run."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from tamperbench.errors import UserError


def missing_defaults(stored: dict, spec: BaseModel) -> dict:
    """What each spec field ``stored`` lacks reads as in it (``FrozenSpec.stored_defaults``: the field's
    default, or the old behaviour a suite names), as JSON values."""
    cls = type(spec)
    hook = getattr(cls, "stored_defaults", None)
    missing = hook(stored) if hook is not None else {
        k: f.default for k, f in cls.model_fields.items() if k not in stored and not f.is_required()}
    return json.loads(json.dumps(missing, default=str))


def refuse_other_spec(run_dir: Path, stored: dict, spec: BaseModel, spec_dict: dict) -> None:
    """One line when ``stored`` (with what its missing fields read as) is not ``spec_dict``, naming the fields
    that differ and, for a field the run predates, the option that resumes it."""
    missing = missing_defaults(stored, spec)
    full = {**stored, **missing}
    if full != spec_dict:
        diff = sorted(k for k in set(full) | set(spec_dict) if full.get(k) != spec_dict.get(k))
        flags: dict[str, str] = getattr(type(spec), "cli_flags", {})
        older = [f"{k} did not exist when it was made and reads as {full[k]!r} there: resume it with "
                 f"{flags.get(k, '--' + k.replace('_', '-'))} {full[k]}" for k in diff if k in missing]
        raise UserError(f"{run_dir}: holds a run with a different spec (differs in: {', '.join(diff)}); "
                        + ("; ".join(older) + ", or " if older else "") + "use another --out or pass --new to replace it")
