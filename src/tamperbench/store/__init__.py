"""Run directories and their trial records (DuckDB), resume by key, export."""

from tamperbench.store.run_store import SCHEMA_VERSION, Record, RunStore, canonical_json, trial_key

__all__ = ["SCHEMA_VERSION", "Record", "RunStore", "canonical_json", "trial_key"]
