"""Every adapter reads its fixture (original schema) into valid items; wrong schemas give one line."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from tamperbench.tasks.adapters import ADAPTERS, get_adapter
from tamperbench.tasks.adapters.base import seeded_order
from tamperbench.tasks.load import FIXTURES, load
from tamperbench.tasks.sources import SchemaError
from tamperbench.errors import UserError

# Item counts written by hand into each fixture file.
EXPECTED = {"mmlu": 4, "mmlu_pro": 3, "hellaswag": 3, "winogrande": 3, "arc_challenge": 3, "gpqa": 3, "gsm8k": 3,
            "math": 3, "truthfulqa_mc1": 3, "truthfulqa_mc2": 3, "humaneval": 3, "mbpp": 3, "ifeval": 4}
DOMAINS = {"mmlu": "knowledge", "mmlu_pro": "knowledge", "gpqa": "knowledge", "truthfulqa_mc1": "knowledge",
           "truthfulqa_mc2": "knowledge", "hellaswag": "commonsense", "winogrande": "commonsense",
           "arc_challenge": "commonsense", "gsm8k": "arithmetic", "math": "arithmetic", "humaneval": "code",
           "mbpp": "code", "ifeval": "instruction_following"}


def test_all_twelve_benchmarks_registered():
    assert set(ADAPTERS) == set(EXPECTED)  # twelve benchmarks; TruthfulQA as MC1 and MC2
    assert get_adapter("truthfulqa").name == "truthfulqa_mc1"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_loads_with_provenance(name):
    loaded = load(name, fixture=True)
    assert len(loaded.items) == EXPECTED[name]
    for it in loaded.items:
        assert it.benchmark == name and it.domain == DOMAINS[name] and it.id.startswith(f"{name}/")
        source = Path(it.provenance.source)
        assert FIXTURES in source.parents
        assert it.provenance.sha256 == hashlib.sha256(source.read_bytes()).hexdigest()
        assert it.prompt_text().strip()
        if it.choices:
            assert it.answer in it.letters
    assert len({it.id for it in loaded.items}) == len(loaded.items)


def test_items_are_frozen():
    it = load("gsm8k", fixture=True).items[0]
    with pytest.raises(ValidationError):
        it.answer = "27"


def test_gold_read_from_original_fields():
    mmlu = load("mmlu", fixture=True).items
    assert [i.answer for i in mmlu] == ["B", "B", "A", "C"]  # the CSV's last column
    assert mmlu[0].meta["subject"] == "abstract_algebra" and mmlu[0].provenance.split == "test"
    arc = load("arc_challenge", fixture=True).items
    assert arc[1].answer == "B"  # answerKey '2' among labels 1-4 is the second option
    assert len(arc[2].choices) == 3
    assert [i.answer for i in load("gsm8k", fixture=True).items] == ["26", "200", "2,000"]
    assert [i.answer for i in load("math", fixture=True).items] == ["4", "2", "\\frac{3}{4}"]
    assert [i.answer for i in load("winogrande", fixture=True).items] == ["A", "B", "B"]
    assert load("hellaswag", fixture=True).items[0].provenance.split == "validation"
    assert [i.provenance.split for i in load("mbpp", fixture=True).items] == ["test"] * 3


def test_shuffled_options_keep_the_right_text():
    """GPQA / TruthfulQA release the right answer first; the gold letter must follow it through the shuffle."""
    with (FIXTURES / "gpqa" / "gpqa_main.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row, it in zip(rows, load("gpqa", fixture=True).items):
        assert it.choices[it.letters.index(it.answer)] == row["Correct Answer"]
    raw = json.loads((FIXTURES / "truthfulqa" / "mc_task.json").read_text())
    positions = []
    for row, it in zip(raw, load("truthfulqa_mc2", fixture=True).items):
        true_texts = {t for t, label in row["mc2_targets"].items() if label}
        assert {it.choices[it.letters.index(x)] for x in it.true_letters} == true_texts
        positions.append(it.true_letters)
    assert positions != [("A", "B")] * 3  # the released order is not what is shown
    assert seeded_order("gpqa/x", 4) == seeded_order("gpqa/x", 4)
    assert sorted(seeded_order("gpqa/x", 4)) == [0, 1, 2, 3]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("bench,filename,text,expected", [
    ("gsm8k", "g.jsonl", '{"question": "q", "answer": "#### 1"}\n{"question": "q2", "answr": "#### 2"}\n',
     "g.jsonl:2: missing field 'answer'"),
    ("winogrande", "w.jsonl", '{"qID": "1", "sentence": "a _ b", "option1": "x", "answer": "1"}\n',
     "w.jsonl:1: missing field 'option2'"),
    ("hellaswag", "h.jsonl", "\n".join([json.dumps({"ind": 1, "activity_label": "a", "ctx_a": "b", "ctx_b": "c",
                                                     "endings": ["1", "2", "3", "4"], "label": 7})]),
     "h.jsonl:1: field 'label' = 7 is out of range for 4 options"),
    ("mmlu", "m_test.csv", "q,1,2,3,4,A\nq2,1,2,3,4,E\n", "m_test.csv:2: field 'answer' must be one of A, B, C, D"),
    ("gpqa", "g.csv", "Question,Correct Answer\nq,a\n", "g.csv:2: missing field 'Incorrect Answer 1'"),
    ("ifeval", "i.jsonl", '{"key": 1, "prompt": "p", "instruction_id_list": ["no:such"], "kwargs": [{}]}\n',
     "i.jsonl:1: field 'instruction_id_list' has unknown instruction ids: no:such"),
    ("humaneval", "h.jsonl", '{"task_id": "x", "prompt": "def f():\\n", "canonical_solution": "", "entry_point": "f"}\n',
     "h.jsonl:1: missing field 'test'"),
    ("mbpp", "m.jsonl", '{"task_id": 11, "text": "t", "code": "c", "test_list": []}\n',
     "m.jsonl:1: field 'test_list' must be a non-empty list"),
    ("arc_challenge", "a.jsonl", 'not json\n', "a.jsonl:1: not valid JSON"),
    ("math", "p.jsonl", '{"problem": "p", "solution": "no box here"}\n', "p.jsonl:1: field 'solution' has no \\boxed"),
])
def test_wrong_schema_is_one_line_naming_file_line_field(tmp_path, bench, filename, text, expected):
    path = _write(tmp_path, filename, text)
    with pytest.raises(SchemaError) as err:
        load(bench, path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(str(tmp_path)) and expected in message


def test_duplicate_ids_and_missing_path(tmp_path):
    path = _write(tmp_path, "d.jsonl", '{"qID": "1", "sentence": "a _", "option1": "x", "option2": "y", "answer": "1"}\n' * 2)
    with pytest.raises(UserError, match="d.jsonl:2: duplicate item id 'winogrande/1'"):
        load("winogrande", path)
    with pytest.raises(UserError, match="no such file"):
        load("gsm8k", tmp_path / "absent.jsonl")


def test_parquet_in_hub_schema(tmp_path):
    """cais/mmlu's Parquet layout {question, subject, choices, answer:int} reads like the CSV."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"question": ["2+2?"], "subject": ["elementary_mathematics"],
                      "choices": [["3", "4", "5", "6"]], "answer": [1]})
    pq.write_table(table, tmp_path / "test-00000.parquet")
    (it,) = load("mmlu", tmp_path / "test-00000.parquet").items
    assert it.answer == "B" and it.choices == ("3", "4", "5", "6") and it.provenance.line == 1


def test_hub_offline_is_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no hub here; the message must say to pass --data
    monkeypatch.setenv("TAMPERBENCH_HOME", "/nonexistent-tb-home")
    with pytest.raises(UserError, match="not reachable from here; pass --data PATH"):
        load("gsm8k")


def test_hub_path_reads_hub_schema(monkeypatch):
    """The hub cannot be reached here, so ``datasets.load_dataset`` is replaced by a real in-memory
    ``datasets.Dataset`` in Rowan/hellaswag's hub schema (label as a string); everything after it is real."""
    datasets = pytest.importorskip("datasets")
    from tamperbench.tasks import sources

    row = {"ind": 4, "activity_label": "Removing ice from car", "ctx_a": "Then, the man writes over the snow.",
           "ctx_b": "then", "ctx": "", "endings": ["a", "b", "c", "d"], "source_id": "x", "split": "val",
           "split_type": "indomain", "label": "3"}
    calls = []

    def fake_load_dataset(name, config=None, split=None):
        calls.append((name, config, split))
        return datasets.Dataset.from_list([row])

    monkeypatch.setattr(sources, "hub_reachable", lambda timeout_s=3.0: True)
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    monkeypatch.setenv("TAMPERBENCH_HOME", "/nonexistent-tb-home")
    (it,) = load("hellaswag").items
    assert calls == [("Rowan/hellaswag", None, "validation")]
    assert it.answer == "D" and it.provenance.source == "hub:Rowan/hellaswag/validation"
    assert it.provenance.sha256.startswith("fingerprint:")
    assert it.question == "Removing ice from car: Then, the man writes over the snow. Then"
