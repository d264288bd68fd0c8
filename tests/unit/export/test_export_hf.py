"""`tamperbench export RUN --format hf`: a folder that `datasets.load_dataset` reads back, with a card.

Real DuckDB run store, real parquet files, the real `datasets` loader (offline: a local folder). Only
publishing (`push_to_hub`) needs the hub and is not tested.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from tamperbench.errors import UserError
from tamperbench.export.hf import export_hf
from tamperbench.store import Record, RunStore

datasets = pytest.importorskip("datasets")


class Spec(BaseModel):
    suite: str = "quote"
    note: str = "```\n<script>alert(1)</script>"


class Answer(Record):
    response: str
    verdict: str


class Clean(Record):
    tokens: list[int]


def _run(tmp_path: Path) -> Path:
    from tamperbench.models.provenance import ModelProvenance

    prov = ModelProvenance(source="embedded", kind="embedded", resolved_path="/x", sha256="ab" * 32,
                           dtype="float32", device="cpu", torch_version="t", transformers_version="tf",
                           tamperbench_version="0")
    run = tmp_path / "run"
    with RunStore.open(run, Spec()) as store:
        pid = store.put_provenance(prov)
        store.write("quote_trials", [Answer(key=f"k{i}", provenance_id=pid, response=f"=cmd {i}", verdict="faithful")
                                     for i in range(5)])
        store.write("quote_clean", [Clean(key=f"c{i}", provenance_id=pid, tokens=[i, i + 1]) for i in range(2)])
    return run


def test_every_record_table_loads_back_as_its_own_config_with_provenance(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    written = export_hf(_run(tmp_path), out)
    assert [(name, n) for name, _, n in written] == [("quote_trials", 5), ("quote_clean", 2)]
    main = datasets.load_dataset(str(out))  # the default config: the run's largest table
    assert list(main) == ["quote_trials"] and main["quote_trials"].num_rows == 5
    assert main["quote_trials"][0]["response"] == "=cmd 0"  # bytes untouched in a dataset
    clean = datasets.load_dataset(str(out), "quote_clean")["quote_clean"]
    assert clean.num_rows == 2 and clean[1]["tokens"] == [1, 2]
    assert '"sha256": "' + "ab" * 32 in str(main["quote_trials"][0]["provenance"]) or \
        main["quote_trials"][0]["provenance"]["sha256"] == "ab" * 32


def test_the_card_names_suite_models_spec_licence_and_citation(tmp_path: Path) -> None:
    from huggingface_hub import DatasetCard

    out = tmp_path / "ds"
    export_hf(_run(tmp_path), out)
    card = DatasetCard.load(out / "README.md")
    assert card.data.license == "apache-2.0" and "quote" in card.data.tags
    text = card.text
    assert "Exact Words" in text and "embedded (sha256 abababababababab..., float32)" in text
    assert "<script>" in text  # the spec is shown verbatim, but inside a fence its backticks cannot close
    assert "\n````json\n" in text


def test_an_existing_folder_is_refused_and_nothing_is_left_behind(tmp_path: Path) -> None:
    run = _run(tmp_path)
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(UserError, match="--out: .* exists and is not an empty folder"):
        export_hf(run, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "run"]
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
