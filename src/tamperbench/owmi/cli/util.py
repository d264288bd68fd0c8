"""Option parsing shared by the analysis commands (``cli.py``, ``kp_cli.py``): one line per bad value."""

from __future__ import annotations

from tamperbench.errors import UserError


def parse_range(text: str, field: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise UserError(f"{field}: expected START:END (inclusive), got {text!r}") from None
    return lo, hi


def build_spec(cls, field: str, **kw):
    from pydantic import ValidationError

    try:
        return cls(**{k: v for k, v in kw.items() if v is not None})
    except ValidationError as err:
        e = err.errors()[0]
        loc = ".".join(str(x) for x in e["loc"]) or field
        raise UserError(f"{field}{'.' + loc if loc != field else ''}: {e['msg']}") from None
