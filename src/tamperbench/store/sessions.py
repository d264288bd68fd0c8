"""A run's ``sessions`` table: one row per process that opened the run for a model, with what it computed with
(``tamperbench.runs.session`` builds the record: torch threads, thread variables, command, commit).

Kept out of the provenance and the trial keys on purpose (a resume on other cores keeps its trials); the table
is made on first use, so a run made before sessions were recorded reads as it was."""

from __future__ import annotations

import json
from typing import Any

from tamperbench.store.run_store import canonical_json, trial_key


def put_session(store: Any, record: dict) -> str:
    """Store one session record in ``store`` (a writable ``RunStore``). Its id hashes the record but its
    ``recorded_at``: the same settings recorded again by the same process are one row, a change (another
    model, another thread count set in between) is another."""
    sid = trial_key({k: v for k, v in record.items() if k != "recorded_at"})[:16]
    store.con.execute("CREATE TABLE IF NOT EXISTS sessions (id VARCHAR PRIMARY KEY, record JSON)")
    store.con.execute("INSERT OR IGNORE INTO sessions VALUES (?, ?)", [sid, canonical_json(record)])
    return sid


def read_sessions(store: Any) -> list[dict]:
    """The stored session records of ``store``, oldest first; [] for a run made before they were recorded. A
    hand-edited row that is not a JSON object says nothing and is left out."""
    if not store.has_table("sessions"):
        return []
    rows = []
    for (raw,) in store.con.execute("SELECT record FROM sessions").fetchall():
        try:
            row = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
    return sorted(rows, key=lambda r: (str(r.get("recorded_at", "")), str(r.get("session", ""))))
