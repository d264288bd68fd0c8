"""Export a run as a Hugging Face dataset folder: ``load_dataset(DIR, TABLE)`` reads it back.

Layout (what ``datasets`` expects of a folder with a card, its "manual configuration"):

- ``data/<table>.parquet``: every record table of the run, provenance joined in (written by
  :func:`tamperbench.export.export_run`, so the same guards apply: only record tables, quoted
  identifiers, the target a bound parameter);
- ``README.md``: the dataset card, built with ``huggingface_hub.DatasetCard``; its YAML header
  declares one config per record table whose single split is named after the table, the first
  (the run's main table) marked ``default``. One config per table, not one config with a split per
  table, because record tables have different columns and ``datasets`` casts every split of a
  config to one schema.

The folder is written into a temporary sibling and renamed into place, so an interrupted export
leaves no half-written dataset, and an existing non-empty ``--out`` is refused rather than mixed.
Publishing is ``DatasetDict.push_to_hub`` or ``huggingface_hub.upload_folder`` on this folder; it
needs the hub, which tests cannot reach.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from tamperbench import __version__
from tamperbench.errors import UserError
from tamperbench.export.tables import export_run, record_tables
from tamperbench.safeio.markdown import escape_markdown
from tamperbench.store import RunStore

# What each suite's records come from, for the card's citation section: the paper (title, authors,
# public address) and what of it the records use (the Exact Words documents and items are tamperbench's own).
SOURCES = {
    "sleight": ("Sleight of Word Benchmark: Can Language Models Notice If Their Own Output Was Tampered "
                "With?", "Alberto Cetoli, https://fractalego.github.io/Sleight-of-Word/", "questions (Appendix F), substitution words (Appendix E) and "
                "judge prompt (Appendix G) from the paper"),
    "quote": ("Exact Words: I planted typos to catch AI models editing quotes", "Kaggle Benchmarking "
              "Challenge submission, https://www.kaggle.com/benchmarks/saharshtibrewala/exact-words", "documents and items written for tamperbench (the paper's are not "
              "public)"),
    "owmi": ("Open-Weight Masked Introspection: Measuring What Language Models Can Report About Their Own "
             "Computation", "Emilio Ferrara, arXiv:2608.20569, https://arxiv.org/abs/2608.20569", "items from tamperbench's own item files "
             "and the benchmark adapters"),
}
ITEMS_LICENSE = "apache-2.0"


def _require_hub() -> type:
    try:
        from huggingface_hub import DatasetCard
    except ImportError:
        raise UserError("--format hf needs the Hugging Face libraries: pip install 'tamperbench[hf]'") from None
    return DatasetCard


def _models(store: RunStore) -> list[str]:
    if "provenance" not in store.tables():
        return []
    names = set()
    for row in store.rows("provenance"):
        record = row.get("record")
        if isinstance(record, str):
            try:
                record = json.loads(record)
            except ValueError:
                continue
        if not isinstance(record, dict) or not record.get("source"):
            continue
        digest = str(record.get("sha256") or "")[:16]
        names.add(f"{record['source']} (sha256 {digest}..., {record.get('dtype', '?')})" if digest else str(record["source"]))
    return sorted(names)


def _card_text(suite: str, tables: list[tuple[str, int]], models: list[str], spec: dict) -> str:
    title, authors, data_note = SOURCES.get(suite, (suite, "", "tamperbench's own items"))
    spec_text = json.dumps(spec, indent=2, sort_keys=True, ensure_ascii=False)
    # a fence longer than any backtick run in the (untrusted) spec, so its text cannot close it
    longest = max((len(run) for run in re.findall(r"`+", spec_text)), default=0)
    fence = "`" * max(3, longest + 1)
    suite = escape_markdown(suite)
    lines = [
        f"# tamperbench {suite} run",
        "",
        f"Records of one {suite} run of [tamperbench](https://github.com/tamperbench/tamperbench) "
        f"{__version__}, exported with `tamperbench export RUN --format hf`. Every row carries its "
        "`provenance` (model source and sha256, dtype, device, library versions) and the exact prompt "
        "and decoding settings of its run.",
        "",
        "## Splits",
        "",
        "| config / split | rows |",
        "|---|---|",
        *(f"| `{name}` | {n} |" for name, n in tables),
        "",
        "```python",
        "from datasets import load_dataset",
        f'ds = load_dataset("PATH_OR_REPO", "{tables[0][0]}")',
        "```",
        "",
        "## Models",
        "",
        *(f"- {escape_markdown(m)}" for m in models or ["(no provenance table in this run)"]),
        "",
        "## Run spec",
        "",
        fence + "json",
        spec_text,
        fence,
        "",
        "## Licence and sources",
        "",
        f"tamperbench and its item files are licensed {ITEMS_LICENSE}. Data: {data_note}.",
        "Model outputs are subject to the licence of the model that produced them.",
        "",
        "## Citation",
        "",
        f"Protocol: *{title}* ({authors}). Please cite it, and tamperbench, when you use these records.",
        "",
    ]
    return "\n".join(lines)


def export_hf(run_dir: Path, out: Path) -> list[tuple[str, Path, int]]:
    """Write ``out`` as a ``datasets``-loadable folder; returns (table, file, rows) per table."""
    card_cls = _require_hub()
    from huggingface_hub import DatasetCardData

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--out: {out} exists and is not an empty folder; give a new folder for the dataset")
    store = RunStore.open_existing(run_dir, read_only=True)
    try:
        tables, _other = record_tables(store)
        counts = {name: store.count(name) for name in tables}
        models = _models(store)
        spec = dict(store.spec_dict)
    finally:
        store.close()
    if not tables:
        raise UserError(f"{run_dir}: the run has no records to export")
    suite = str(spec.get("suite", "unknown"))
    # the run's main table first: the one holding the most records
    tables.sort(key=lambda name: (-counts[name], name))
    parent = out.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as err:
        raise UserError(f"--out: cannot create a folder in {parent} ({err.strerror or err})") from None
    try:
        written = []
        for name in tables:
            for table, _path, n in export_run(run_dir, "parquet", tmp / "data" / f"{name}.parquet", table=name):
                written.append((table, out / "data" / f"{table}.parquet", n))
        configs = [{"config_name": name, "data_files": [{"split": name, "path": f"data/{name}.parquet"}],
                    **({"default": True} if i == 0 else {})} for i, name in enumerate(tables)]
        data = DatasetCardData(license=ITEMS_LICENSE, pretty_name=f"tamperbench {suite} run",
                               tags=["tamperbench", suite, "evaluation"], configs=configs)
        text = f"---\n{data.to_yaml()}\n---\n\n" + _card_text(suite, [(t, counts[t]) for t in tables], models, spec)
        card = card_cls(text)
        card.save(str(tmp / "README.md"))
        if out.exists():
            out.rmdir()  # empty, checked above
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written
