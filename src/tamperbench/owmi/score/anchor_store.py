"""Anchor results in a run directory (RunStore), so ``owmi score`` finds them beside engine runs.

One table, ``owmi_anchors``: one row per anchor run (kind 'probe' or 'known_positive'), the full
JSON result kept as text beside the typed columns a reader filters on. The run's spec.json is the
anchor's spec, so rerunning the same command resumes (and a different spec needs ``--new``).

The identity of the weights an anchor was fitted on (model, model_revision, dtype, quantized:
``weights_identity``) lives in the JSON result only, not as typed columns: ``RunStore.ensure_table``
is ``CREATE TABLE IF NOT EXISTS``, so an anchor directory written before the columns existed would
keep its old table and the insert that names the new columns would fail on resume. ``owmi score``
reads the JSON (``load_anchors``), so the typed columns would add nothing it filters on.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from tamperbench.errors import UserError
from tamperbench.store import Record, RunStore
from tamperbench.store.run_store import trial_key

ANCHOR_TABLE = "owmi_anchors"


class AnchorRecord(Record):
    suite: str = "owmi"
    kind: str  # probe | known_positive
    model: str
    site: str
    layer: int
    passes: bool | None
    result: str  # the full JSON result


def weights_identity(backend) -> dict:
    """The identity fields of the weights ``backend`` runs, filled as OWMI run records fill them
    (``owmi/run/runner.py``: revision else sha256, the provenance dtype, quantized = a quantization is
    named), so ``identity.of(anchor) == identity.of(run row)`` holds exactly when both read the same
    weights at the same precision. Why: a probe fitted on float32 weights says nothing certain about
    a bfloat16 or dequantized-GGUF cell of the same name, and rho = margin / m_probe must not mix them."""
    prov = backend.provenance
    return {"model_revision": prov.weights_revision, "dtype": str(prov.dtype),
            "quantized": bool(prov.quantization)}


def save_anchor(out: str | Path, spec: BaseModel, result: dict, *, new: bool = False) -> Path:
    store = RunStore.open(out, spec, new=new)
    try:
        store.ensure_table(ANCHOR_TABLE, AnchorRecord)
        rec = AnchorRecord(key=trial_key(spec), provenance_id=result.get("provenance_id", ""), kind=result["kind"],
                           model=result["model"], site=result["site"], layer=int(result["layer"]),
                           passes=result.get("passes"), result=json.dumps(result, default=str))
        store.replace(ANCHOR_TABLE, AnchorRecord, [rec], "kind = ?", [result["kind"]])  # other kinds stay
    finally:
        store.close()
    return Path(out)


def load_anchors(store: RunStore) -> list[dict]:
    if not store.has_table(ANCHOR_TABLE):
        return []
    return [json.loads(r["result"]) for r in store.rows(ANCHOR_TABLE)]


def stored_anchor(out: str | Path, spec: BaseModel, kind: str) -> dict | None:
    """The stored result of an anchor run in ``out`` made with exactly ``spec`` (else None)."""
    if not (Path(out) / "spec.json").is_file():
        return None
    try:
        store = RunStore.open_existing(out, read_only=True)
    except UserError:  # not a run directory, or an unreadable one: train afresh (save_anchor then says why)
        return None
    try:
        want = spec.model_dump(mode="json")
        hits = [a for a in load_anchors(store) if a.get("kind") == kind and a.get("spec") == want]
    finally:
        store.close()
    return hits[-1] if hits else None


def save_anchor_rows(out: str | Path, spec: BaseModel, kind: str, results: list[dict]) -> None:
    """Replace the rows of ``kind`` in the anchor run ``out`` with ``results`` (one per read-out:
    the known-positive check), keyed by (spec, kind, read-out)."""
    store = RunStore.open(out, spec)
    try:
        recs = [AnchorRecord(key=trial_key({"spec": spec.model_dump(mode="json"), "kind": kind, "readout": r["readout"]}),
                             provenance_id=r.get("provenance_id", ""), kind=kind, model=r["model"], site=r["site"],
                             layer=int(r["layer"]), passes=r.get("passes"), result=json.dumps(r, default=str))
                for r in results]
        store.replace(ANCHOR_TABLE, AnchorRecord, recs, "kind = ?", [kind])
    finally:
        store.close()


ADAPTER_CACHE = "known-positive"


def adapter_cache(spec: BaseModel, base_sha256: str) -> Path:
    """Where the adapter trained with ``spec`` on the base weights ``base_sha256`` is kept
    (``$TAMPERBENCH_HOME/known-positive/<key>``, content-addressed: the key hashes both), so a second
    ``--out`` reuses it rather than training again."""
    from tamperbench.models.sources import tamperbench_home

    key = trial_key({"spec": spec.model_dump(mode="json"), "base_sha256": base_sha256})[:32]
    return tamperbench_home() / ADAPTER_CACHE / key


def cached_adapter(spec: BaseModel, base_sha256: str) -> tuple[Path, dict] | None:
    """(adapter folder, anchor result) from the cache, or None when this spec has not been trained."""
    folder = adapter_cache(spec, base_sha256)
    try:
        result = json.loads((folder / "result.json").read_text())
    except (OSError, ValueError):
        return None
    if not (folder / "adapter" / "adapter_config.json").is_file() or result.get("spec") != spec.model_dump(mode="json"):
        return None
    return folder / "adapter", result


def store_adapter(spec: BaseModel, base_sha256: str, adapter_dir: Path, result: dict) -> Path:
    """Copy a trained adapter and its anchor result into the cache (a temporary folder renamed into
    place, so a reader never sees half a copy)."""
    import shutil
    import tempfile

    folder = adapter_cache(spec, base_sha256)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
    try:
        shutil.copytree(adapter_dir, tmp / "adapter")
        (tmp / "result.json").write_text(json.dumps(result, default=str, indent=1))
        if folder.exists():
            shutil.rmtree(tmp)
        else:
            tmp.rename(folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder
