"""Read benchmark rows from local files in their original published format, or from the hub.

WHY one reader for every adapter: the formats benchmarks ship in are few (JSON lines, a JSON
array or object, Parquet, CSV with or without a header, gzip of any of these, or a folder of such
files as in the original MATH release), and the user-facing promise is the same for all of them:
a row the adapter cannot read gives ONE line naming the file, the line and the missing field.
Every row carries the sha256 of the bytes it came from, so an item can be traced to its file.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from tamperbench.errors import UserError

SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet", ".csv", ".csv.gz")
MAX_FILE_BYTES = 2 * 1024**3  # bound what one file may hold; real benchmark files are far smaller


@dataclass(frozen=True)
class RowCtx:
    """Where one row came from: file, its sha256, 1-based line (JSON lines / CSV) or row index."""

    path: str
    sha256: str
    line: int
    stem: str  # file name without suffixes, e.g. 'abstract_algebra_test' (MMLU subject + split)


class SchemaError(UserError):
    """A row that does not have the original schema's fields; the message names file, line, field."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stem(path: Path) -> str:
    name = path.name
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def data_files(path: Path) -> list[Path]:
    """The files a --data PATH stands for: the file itself, or every supported file under a folder."""
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))
        if not files:
            raise UserError(f"{path}: no data files ({', '.join(SUFFIXES)}) in this folder")
        return files
    raise UserError(f"{path}: no such file or folder")


MAX_TEXT_BYTES = 256 * 1024**2  # decompressed: the largest real benchmark file (MMLU's CSVs) is a few MB


def _text(path: Path) -> str:
    from tamperbench.safeio.files import check_size

    check_size(path, MAX_FILE_BYTES, "data file")  # also refuses a FIFO or device before reading
    if path.name.endswith(".gz"):  # bound what it expands to, read in chunks: a small gzip can hold gigabytes
        chunks, got = [], 0
        try:
            with gzip.open(path, "rb") as gz:
                while got <= MAX_TEXT_BYTES and (chunk := gz.read(min(1 << 20, MAX_TEXT_BYTES + 1 - got))):
                    chunks.append(chunk)
                    got += len(chunk)
        except (OSError, EOFError) as err:  # gzip.BadGzipFile is an OSError
            raise UserError(f"{path}: not a readable gzip file ({err})") from None
        if got > MAX_TEXT_BYTES:
            raise UserError(f"{path}: expands to more than {MAX_TEXT_BYTES >> 20} MiB when decompressed; refusing "
                            "to read it (split it)")
        raw = b"".join(chunks)
    else:
        raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None


def read_rows(path: Path, csv_columns: tuple[str, ...] | None = None) -> Iterator[tuple[dict[str, Any], RowCtx]]:
    """Yield (row, ctx) for every row of one file.

    ``csv_columns`` names the columns of a header-less CSV (the original MMLU release); when
    None the CSV's first line is its header (GPQA).
    """
    digest = sha256_file(path)
    stem = _stem(path)
    name = path.name
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as err:  # pyarrow raises several types for a broken file
            raise UserError(f"{path}: not a readable Parquet file ({type(err).__name__}: {err})") from None
        for i, row in enumerate(rows, start=1):
            yield row, RowCtx(str(path), digest, i, stem)
        return
    text = _text(path)
    if name.endswith((".csv", ".csv.gz")):
        reader = csv.reader(io.StringIO(text, newline=""))
        header = None if csv_columns else next(reader, None)
        columns = list(csv_columns) if csv_columns else [c.strip() for c in (header or [])]
        for record in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in record):
                continue
            if len(record) != len(columns):
                raise SchemaError(f"{path}:{line}: expected {len(columns)} CSV columns ({', '.join(columns)}), "
                                  f"found {len(record)}")
            yield dict(zip(columns, record)), RowCtx(str(path), digest, line, stem)
        return
    if name.endswith((".json", ".json.gz")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None  # JSON lines saved as .json: fall through to the line reader
        else:
            rows = data if isinstance(data, list) else [data]
            for i, row in enumerate(rows, start=1):
                if not isinstance(row, dict):
                    raise SchemaError(f"{path}:{i}: expected a JSON object per item, got {type(row).__name__}")
                yield row, RowCtx(str(path), digest, i, stem)
            return
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as err:
            raise SchemaError(f"{path}:{line_no}: not valid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(row, dict):
            raise SchemaError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
        yield row, RowCtx(str(path), digest, line_no, stem)


def hub_rows(dataset: str, config: str | None, split: str, name: str) -> Iterator[tuple[dict[str, Any], RowCtx]]:
    """Rows from the Hugging Face hub through ``datasets`` (optional; one line when unreachable)."""
    hint = f"{name}: the hub ({dataset}) is not reachable from here; pass --data PATH to local files (see bench/README.md)"
    if not hub_reachable():
        raise UserError(hint)
    try:
        import datasets  # lazy: heavy, optional, and only useful online
    except ImportError:
        raise UserError(f"{name}: the 'datasets' package is not installed; pass --data PATH to local files") from None
    try:
        ds = datasets.load_dataset(dataset, config, split=split)
    except Exception as err:  # connection, auth (gated), or missing-config errors all mean: use local files
        raise UserError(f"{hint} [{type(err).__name__}]") from None
    files = [f.get("filename", "") for f in getattr(ds, "cache_files", [])]
    # The downloaded Arrow file's bytes when there is one, else the datasets fingerprint of the data.
    digest = (sha256_file(Path(files[0])) if files and Path(files[0]).is_file()
              else f"fingerprint:{getattr(ds, '_fingerprint', 'unknown')}")
    source = f"hub:{dataset}" + (f"/{config}" if config else "") + f"/{split}"
    for i, row in enumerate(ds, start=1):
        yield dict(row), RowCtx(source, digest, i, split)


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """One TCP connect to the hub endpoint, so an offline machine gets one line at once, not minutes of retries."""
    import os
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout_s).close()
    except OSError:
        return False
    return True


def need(row: dict[str, Any], ctx: RowCtx, *fields: str) -> list[Any]:
    """The values of ``fields`` in ``row``; a missing one is a one-line SchemaError naming file, line, field."""
    values = []
    for field in fields:
        if field not in row or row[field] is None:
            have = ", ".join(sorted(map(str, row))[:12])
            raise SchemaError(f"{ctx.path}:{ctx.line}: missing field {field!r} (row has: {have})")
        values.append(row[field])
    return values


def bad(ctx: RowCtx, field: str, why: str) -> SchemaError:
    """A SchemaError for a field that is present but wrong."""
    return SchemaError(f"{ctx.path}:{ctx.line}: field {field!r} {why}")
