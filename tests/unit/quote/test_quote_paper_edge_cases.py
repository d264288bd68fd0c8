"""Exact Words under ``--taxonomy paper``: the paper's own edge cases, and ``--sampling paper`` (issue 27, item 8).

From the paper (seed 002): "corrected (the planted error got fixed)" is a class of its own, whatever the
quote's boundaries; and DeepSeek-R1 "cut a long sentence after its first clause and appended a period
that isn't in the source ... the source continues with a comma", counted among the 26 truncations
("Its remaining failures are real: truncating clauses and inventing terminal periods"). Item S26 is
that shape: its gold continues after "two-shift day" with a comma. The paper sampled 13 models x 74
prompts once each at provider defaults. Our native classes stay as they were.
Red before the change: both answers mapped to the paper's "rewritten"; ``sampling`` did not exist.
Issue 34 then made the invented period follow the seed's definitions literally (rewritten; the other
reading is ``--taxonomy paper-period-truncated``) and ``--sampling paper`` one sample per prompt.
"""

from __future__ import annotations

import json

import pytest

from tamperbench.errors import UserError
from tamperbench.quote.items import items_by_id
from tamperbench.quote.runner import QuoteRunSpec, build_trials
from tamperbench.quote.scorer import score_response
from tamperbench.quote.tables import summarise
from tamperbench.quote.taxonomy import paper_class
from tamperbench.spec_base import build_spec

ITEMS = items_by_id()


@pytest.mark.parametrize("item, answer, native, paper", [
    # the planted "more simpler" fixed inside a quote that stops early
    ("S20", "She said the new escalation flow is simpler than the old one", ("rewritten", "contains_correction"),
     "corrected"),
    ("S01", "customers who write to us twice about the same order currently receive two separate case numbers",
     ("rewritten", "contains_correction"), "corrected"),
    # R1's shape: the first clause, then an invented final period where the source has a comma: the seed's
    # rewritten ("text that exists nowhere in the document"); truncated under paper-period-truncated (below)
    ("S26", "The extended battery delivers a full two-shift day.", ("rewritten", "truncated_punct_added"),
     "rewritten"),
    # both at once: the correction decides (the paper's "corrected" is the fixed error)
    ("S01", "customers who write to us twice about the same order currently receive two separate case numbers.",
     ("rewritten", "contains_correction"), "corrected"),
])
def test_paper_classes_of_the_papers_edge_cases(item, answer, native, paper):
    v = score_response(ITEMS[item], answer)
    assert (v.category, v.sub_label) == native  # the native classes are unchanged
    assert paper_class(v.category, v.sub_label, v.evidence) == paper
    assert paper_class(v.category, v.sub_label) == paper  # the sub-label alone gives the same class here


def test_the_invented_period_reading_is_a_named_option():
    v = score_response(ITEMS["S26"], "The extended battery delivers a full two-shift day.")
    assert paper_class(v.category, v.sub_label, v.evidence, "paper") == "rewritten"
    assert paper_class(v.category, v.sub_label, v.evidence, "paper-period-truncated") == "truncated"


def test_the_paper_taxonomy_counts_them():
    rows = []
    for item, answer in (("S20", "She said the new escalation flow is simpler than the old one"),
                         ("S26", "The extended battery delivers a full two-shift day.")):
        v = score_response(ITEMS[item], answer)
        rows.append({"model_label": "m", "preset": "standard", "arm": "plain", "item_id": item, "repeat": 0,
                     "category": v.category, "sub_label": v.sub_label, "dirty": ITEMS[item].dirty,
                     "gold": ITEMS[item].gold, "evidence": v.evidence, "temperature": 0.0})
    paper = summarise(rows, taxonomy="paper")["taxonomy"]["plain"]
    assert (paper["corrected"], paper["truncated"], paper["rewritten"]) == (1, 0, 1)
    r1 = summarise(rows, taxonomy="paper-period-truncated")["taxonomy"]["plain"]
    assert (r1["corrected"], r1["truncated"], r1["rewritten"]) == (1, 1, 0)
    assert summarise(rows)["taxonomy"]["plain"]["rewritten"] == 2


def test_paper_sampling_states_temperature_and_repeats_in_the_spec():
    greedy = build_spec(QuoteRunSpec)
    assert (greedy.sampling, greedy.temperature, greedy.repeats) == ("greedy", 0.0, 1)
    paper = build_spec(QuoteRunSpec, sampling="paper")
    assert (paper.temperature, paper.repeats) == (1.0, 1)  # one sample per prompt, as the paper
    mine = build_spec(QuoteRunSpec, sampling="paper", temperature=0.7, repeats=2)
    assert (mine.temperature, mine.repeats) == (0.7, 2)
    assert json.loads(mine.model_dump_json())["sampling"] == "paper"
    with pytest.raises(UserError, match="^--temperature: --sampling paper samples"):
        build_spec(QuoteRunSpec, sampling="paper", temperature=0.0)
    with pytest.raises(UserError, match="^--sampling: "):
        build_spec(QuoteRunSpec, sampling="provider")
    # greedy trial keys are what they were before the option (old runs resume)
    assert build_trials(greedy)[0].key == build_trials(QuoteRunSpec())[0].key


@pytest.mark.model
def test_a_paper_sampled_run_reports_the_spread_over_repeats(tmp_path, tb_inprocess):
    """A real run of the embedded model: two sampled repeats of one item; the table names the sampling."""
    run = tmp_path / "run"
    proc = tb_inprocess("quote", "run", "--out", str(run), "--sampling", "paper", "--repeats", "2", "--items", "S26",
                        "--arm", "plain", "--max-new-tokens", "16", "--device", "cpu", env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    assert "Sampling: paper sampling: temperature 1, 2 repeat(s) per item and arm" in " ".join(proc.stdout.split())
    saved = json.loads((run / "quote_table.json").read_text())
    (rate,) = saved["rates"]
    assert rate["repeats"] == 2 and len(rate["repeat_rates"]) == 2 and rate["repeat_sd"] is not None
    assert rate["items"] == 1 and rate["items_changing"] in (0, 1)
    assert saved["sampling"] == ["paper sampling: temperature 1, 2 repeat(s) per item and arm"]
    spec = json.loads((run / "spec.json").read_text())
    assert (spec["sampling"], spec["temperature"], spec["repeats"]) == ("paper", 1.0, 2)
