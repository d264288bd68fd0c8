"""The results page (tools/results.py, tools/results_page.py) shows only numbers the runs produced.

Sleight of Word runs are written through the real store with no model (``sleight.synthetic``); Exact Words
rows go through the real ``quote.tables.summarise``; the OWMI section gets condition rows shaped like
``owmi.summary.SQL``'s. Every number on the rendered page must be a value of the collected data (as shown,
rounded to the digits shown, or as a percentage); the committed page must be exactly what its committed
``results.json`` renders to.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import duckdb
import pytest

from tamperbench.quote.tables import summarise, to_markdown
from tamperbench.sleight.records import TRIALS_TABLE
from tamperbench.sleight.synthetic import write_synthetic_run
from tamperbench.store.run_store import DB_FILE

ROOT = Path(__file__).resolve().parents[3]
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?")
MACHINE = {"date": "2026-12-01 21:00 UTC", "command": "python tools/results.py --size cpu-small",
           "commit": "c" * 40, "dirty": False, "cpus": 2, "torch_threads": 1, "torch": "2.13.0+cpu",
           "python": "3.11.7", "platform": "Linux x86_64", "tamperbench": "0.1.0"}


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _values(obj, out: set[float]) -> set[float]:
    """Every number in the data: JSON numbers and the numbers inside its strings (tables, notes, commands)."""
    if isinstance(obj, bool) or obj is None:
        return out
    if isinstance(obj, (int, float)):
        out.add(float(obj))
    elif isinstance(obj, str):
        out.update(float(x) for x in NUMBER.findall(obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _values(k, out)
            _values(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _values(v, out)
    return out


def foreign_numbers(page: str, data: dict) -> list[str]:
    """Numbers on the page that are no value of ``data`` at the digits shown (nor that value x 100)."""
    values = _values(data, set())
    bad = []
    for tok in NUMBER.findall(page):
        digits = len(tok.split(".")[1]) if "." in tok else 0
        shown = float(tok)
        if not any(round(v, digits) == shown or round(100 * v, digits) == shown for v in values):
            bad.append(tok)
    return bad


def _quote_rows() -> list[dict]:
    def row(model, arm, cat, item, dirty=False):
        return {"model_label": model, "preset": "standard", "arm": arm, "item_id": item, "category": cat,
                "sub_label": None, "dirty": dirty, "repeat": 0, "gold": "gold " + item,
                "evidence": {"planted_span_present": False} if dirty else {}}

    return [row("m1", "plain", "faithful", "S01"), row("m1", "plain", "truncated", "S02"),
            row("m1", "strict", "faithful", "S01"), row("m1", "strict", "rewritten", "S03", dirty=True),
            row("m2", "plain", "faithful", "S01"), row("m2", "strict", "faithful", "S02")]


def _owmi(parsed: int) -> dict:
    cond = [{"track": "A", "hook_scope": "all", "condition": c, "tier": 0, "runs": 3, "paired": 3,
             "parsed": parsed, "yes_rate": (1 / 3) if parsed else None, "rubric_rate": None,
             "js": 0.01234 if c != "sham" else 0.0, "causal": None} for c in ("intervention", "sham", "random")]
    return {"runs": [{"run": "runs/results/owmi-quick-embedded", "spec": {"preset": "quick"}, "conditions": cond}],
            "score_md": None, "positive_check_md": None}


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("results")
    runs = [str(write_synthetic_run(tmp / f"sleight-{m}", questions=3, words=3, model=m, seed=i))
            for i, m in enumerate(("synthetic-a", "synthetic-b"))]
    results = _tool("results")
    summary = summarise(_quote_rows())
    data = {"size": "cpu-small", "machine": MACHINE, "notes": [], "steps": ["tamperbench sleight run ..."],
            "sleight": results.collect_sleight(runs, tmp / "tables"),
            "quote": {"runs": [], "summary": summary, "markdown": to_markdown(summary)}, "owmi": _owmi(2)}
    return json.loads(json.dumps(data, default=str)), runs, tmp


def test_every_number_on_the_page_is_a_value_of_the_runs(collected):
    data, _, tmp = collected
    page_mod = _tool("results_page")
    page = page_mod.render(data, page_mod.figures(data, tmp))
    assert foreign_numbers(page, data) == []
    # the check bites: a number typed into the page, or a cell changed after collection, is caught
    assert foreign_numbers(page + "\nThe model flags 37.5% of swaps.\n", data) == ["37.5"]
    tampered = page.replace("| 2 | 1 | 50.0% |", "| 2 | 1 | 55.0% |", 1)
    assert tampered != page and foreign_numbers(tampered, data) == ["55.0"]


def test_sleight_section_counts_match_the_stored_trials(collected):
    data, runs, _ = collected
    page_mod = _tool("results_page")
    page = page_mod.render(data, {})
    t3 = data["sleight"]["tables"]["table3"]
    for run, row in zip(runs, t3["rows"]):
        with duckdb.connect(str(Path(run) / DB_FILE), read_only=True) as con:
            stored = con.execute(f'SELECT count(*), sum(swap_count) FROM "{TRIALS_TABLE}"').fetchone()
        assert (int(row[2]), int(row[3])) == stored == (9, 9)  # Trials and Swaps columns: 3 questions x 3 words
        assert f"| {row[0]} | 0.0 | 9 | 9 | 0.0 |" in page
    m = data["sleight"]["models"][0]
    lo, hi = m["delta_surprisal"]["lo"], m["delta_surprisal"]["hi"]
    assert f"[{lo:+.2f}, {hi:+.2f}]" in page  # Table 1's interval is the runs' bootstrap interval


def test_unparsed_owmi_table_says_so_instead_of_zero(collected):
    data, _, _ = collected
    page_mod = _tool("results_page")
    parsed = page_mod.render(dict(data, owmi=_owmi(2)), {})
    unparsed = page_mod.render(dict(data, owmi=_owmi(0)), {})
    assert "No report parsed" not in parsed and "| 2/3 | 0.33 |" in parsed
    assert "No report parsed in this run" in unparsed and "| 0/3 | n/a |" in unparsed
    mixed = _owmi(2)
    mixed["runs"][0]["conditions"][1].update(parsed=0, yes_rate=None)  # sham: nothing parsed
    page = page_mod.render(dict(data, owmi=mixed), {})
    assert "their yes-rate is n/a, not zero" in page and "Only these rows parsed any report: A/all intervention, " \
        "A/all random." in page


def test_the_committed_page_is_what_its_results_json_renders_to():
    docs = ROOT / "docs"
    stored = docs / "results" / "results.json"
    if not stored.is_file():
        pytest.skip("no committed results page yet")
    page_mod = _tool("results_page")
    data = json.loads(stored.read_text())
    page = page_mod.render(data, page_mod.existing(docs / "results"))
    assert page == (docs / "results.md").read_text()
    assert foreign_numbers(page, data) == []
    assert data["machine"]["commit"] in page and data["machine"]["command"] in page


def test_owmi_score_sections_are_copied_as_score_printed_them(collected):
    data, _, _ = collected
    page_mod = _tool("results_page")
    md = ("# OWMI score\n\nRuns: r (12 analysable rows)\n\n## Reportability profile (x)\n\n| a |\n|---|\n| 0.125 |\n\n"
          "## Detection against paired sham (y)\n\nz\n\n### Pooled (p)\n\n- q\n\n## Variance components (v)\n\n- not shown\n\n"
          "## Sensitivity anchors\n\n- known positive: hits 4/32\n\n## Claim verdicts (Appendix D.5)\n\n- level 0\n")
    page = page_mod.render(dict(data, owmi=dict(_owmi(2), score_md=md)), {})
    for shown in ("Runs: r (12 analysable rows)", "#### Reportability profile (x)", "| 0.125 |",
                  "##### Pooled (p)", "#### Sensitivity anchors", "hits 4/32", "#### Claim verdicts", "- level 0"):
        assert shown in page
    assert "Variance components" not in page and "not shown" not in page and "left in the file" not in page
    check = "| adapted (known positive): `e+peft:a` | choice | 6 (3) | 6/6 | +0.833 |\n\nPASS: under the choice read-out"
    page = page_mod.render(dict(data, owmi=dict(_owmi(2), positive_check_md=check)), {})
    assert check in page and foreign_numbers(page, dict(data, owmi=dict(_owmi(2), positive_check_md=check))) == []
