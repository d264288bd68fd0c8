"""A stored provenance of the same weights read from another folder (a resume after a moved cache).

``resolved_path`` says where the weights were read, not what they are (``sha256`` says that), yet it
is part of the provenance id, and so of every trial key. A run resumed with another
``$TAMPERBENCH_HOME`` (or a moved cache) would otherwise get a new id and redo every stored trial
under it; the run driver (``runs.driver.record_provenance``) adopts the stored record instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

# provenance fields that say where weights were read, not which weights
LOCATION_ONLY = ("resolved_path",)


def _what(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in LOCATION_ONLY and v is not None}


def provenance_moved(store: Any, provenance: BaseModel) -> dict | None:
    """The record ``store`` holds of the same weights loaded the same way from another folder, else
    None. Only a verified 64-hex ``sha256`` can match: for a remote model the address is the
    identity. None as well when the exact record is stored already."""
    mine = provenance.model_dump(mode="json")
    if not re.fullmatch(r"[0-9a-f]{64}", str(mine.get("sha256", ""))):
        return None
    rows = store.con.execute("SELECT id, record FROM provenance ORDER BY id").fetchall()
    if any(pid == provenance.id for pid, _ in rows):  # type: ignore[attr-defined]
        return None
    for _, rec in rows:
        stored = json.loads(rec)
        if _what(stored) == _what(mine):
            return stored
    return None
