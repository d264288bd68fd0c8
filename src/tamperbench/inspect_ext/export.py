"""A tamperbench run as an inspect log (``tamperbench export RUN --format inspect --out FILE.eval``).

Written with inspect's own log API (``EvalLog`` + ``write_eval_log``), so ``inspect view`` and
``read_eval_log`` open it like any inspect run. One sample per record of the run's main table (the
table with the most records): its prompt as input, its reply as the model's output, the whole record
(provenance joined) in the sample's metadata. Exact Words records also carry their verdict as an
``exact_words`` score (faithful = C), so the log's accuracy is the run's faithful rate.
"""

from __future__ import annotations

import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tamperbench import __version__
from tamperbench.errors import UserError
from tamperbench.export.tables import record_tables
from tamperbench.safeio.files import atomic_path
from tamperbench.quote.taxonomy import paper_class
from tamperbench.store import RunStore

INPUT_FIELDS = ("prompt_text", "prompt", "question")
OUTPUT_FIELDS = ("response", "reaction_text", "text", "answer")


def _jsonable(value: Any) -> Any:
    """Metadata must be JSON: NaN/inf become None, other objects their string form."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _first(row: dict, names: tuple[str, ...]) -> str:
    return next((str(row[n]) for n in names if isinstance(row.get(n), str)), "")


def _model_name(spec: dict) -> str:
    """The run's model as the spec names it; a spec.json whose ``model``/``models`` is not text (a hand
    edit, another tool) gives "unknown" rather than breaking the export."""
    if isinstance(spec.get("model"), str) and spec["model"]:
        return spec["model"]
    models = spec.get("models")
    if isinstance(models, list) and models and isinstance(models[0], str):
        return models[0]
    return "unknown"


def export_inspect(run_dir: Path, out: Path) -> tuple[str, Path, int]:
    """Write ``out`` (``.eval`` or ``.json``); returns (table, path, samples)."""
    from tamperbench.inspect_ext import require_inspect

    require_inspect()
    from inspect_ai.log import (EvalConfig, EvalDataset, EvalLog, EvalMetric, EvalResults, EvalSample, EvalScore,
                                EvalSpec, write_eval_log)
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput
    from inspect_ai.scorer import CORRECT, INCORRECT, Score

    if out.suffix not in (".eval", ".json"):
        raise UserError(f"--out: {out} must end in .eval or .json (inspect's two log formats)")
    if out.is_dir():
        raise UserError(f"--out: {out} is a directory; give a file name such as {out / 'run.eval'}")
    store = RunStore.open_existing(run_dir, read_only=True)
    try:
        tables, _ = record_tables(store)
        if not tables:
            raise UserError(f"{run_dir}: the run has no records to export")
        table = max(tables, key=lambda name: (store.count(name), name))
        rows = store.rows(table)
        provenance = {r["id"]: r["record"] for r in store.rows("provenance")} if "provenance" in store.tables() else {}
        spec = dict(store.spec_dict)
    finally:
        store.close()
    suite = str(spec.get("suite", "tamperbench"))
    model = _model_name(spec)
    samples, faithful = [], []
    for i, row in enumerate(sorted(rows, key=lambda r: str(r.get("key")))):
        prompt, reply = _first(row, INPUT_FIELDS), _first(row, OUTPUT_FIELDS)
        meta = _jsonable({**row, "provenance": provenance.get(row.get("provenance_id"))})
        scores = None
        if suite == "quote" and "category" in row:
            ok = row["category"] == "faithful"
            faithful.append(ok)
            scores = {"exact_words": Score(value=CORRECT if ok else INCORRECT, answer=row.get("answer"),
                                           explanation=str(row["category"]),
                                           metadata=_jsonable({"category": row["category"], "sub_label": row.get("sub_label"),
                                                               "paper_class": paper_class(row["category"], row.get("sub_label")),
                                                               "evidence": row.get("evidence")}))}
        samples.append(EvalSample(
            id=str(row.get("key", i)), epoch=1, input=prompt, target=str(row.get("gold") or ""),
            messages=[ChatMessageUser(content=prompt), ChatMessageAssistant(content=reply)],
            output=ModelOutput.from_content(model=model, content=reply), scores=scores, metadata=meta))
    results = None
    if faithful:
        rate = sum(faithful) / len(faithful)
        results = EvalResults(total_samples=len(samples), completed_samples=len(samples), scores=[
            EvalScore(name="exact_words", scorer="tamperbench/exact_words_scorer",
                      metrics={"accuracy": EvalMetric(name="accuracy", value=rate)})])
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    log = EvalLog(status="success", eval=EvalSpec(
        created=created, task=f"tamperbench/{suite}", dataset=EvalDataset(name=f"{suite}:{table}", samples=len(samples)),
        model=model, config=EvalConfig(), task_args={"run": os.fspath(run_dir)},
        metadata=_jsonable({"tamperbench_version": __version__, "spec": spec, "table": table})),
        samples=samples, results=results)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out, out.suffix) as tmp:  # a private folder: no predictable name to plant a link at
            write_eval_log(log, str(tmp))
    except OSError as err:
        raise UserError(f"--out: cannot write {out} ({err.strerror or err})") from None
    return table, out, len(samples)
