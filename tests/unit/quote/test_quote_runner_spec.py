"""Run specs and trial keys (no model needed): bad input is a UserError naming the option."""

import pytest

from tamperbench.errors import UserError
from tamperbench.quote.runner import QuoteRunSpec, build_trials, data_sha256
from tamperbench.quote.tables import summarise, wilson


@pytest.mark.parametrize("kwargs, match", [
    ({"arms": ["loose"]}, "--arm"), ({"repeats": 0}, "--repeats"), ({"repeats": 2}, "--temperature"),
    ({"temperature": -1.0}, "--temperature"), ({"max_new_tokens": 0}, "--max-new-tokens"),
    ({"batch_size": 0}, "--batch-size"), ({"preset": "long"}, "--preset"), ({"item_ids": ["K01"]}, "--items"),
])
def test_bad_specs_are_user_errors(kwargs, match):
    with pytest.raises(UserError, match=match):
        QuoteRunSpec(**kwargs).check()


def test_trials_cover_items_arms_repeats_with_stable_unique_keys():
    spec = QuoteRunSpec(repeats=2, temperature=0.7, data_sha256=data_sha256()).check()
    trials = build_trials(spec)
    assert len(trials) == 37 * 2 * 2
    assert len({t.key for t in trials}) == len(trials)
    assert [t.key for t in trials] == [t.key for t in build_trials(spec)]
    other_seed = build_trials(spec.model_copy(update={"seed": 1}))
    assert not {t.key for t in trials} & {t.key for t in other_seed}
    sub = build_trials(QuoteRunSpec(item_ids=["S01", "S17"], arms=["strict"]).check())
    assert [(t.item.id, t.arm) for t in sub] == [("S01", "strict"), ("S17", "strict")]
    assert "preserving any typos" in sub[0].prompt


def test_wilson_interval_is_sane_at_the_edges():
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and 0.25 < hi < 0.35
    lo, hi = wilson(10, 10)
    assert hi == 1.0 and 0.65 < lo < 0.75


def test_summary_counts_rates_taxonomy_and_hardest_items():
    def row(item, arm, cat, sub=None, dirty=False, repeat=0, planted=None):
        return {"model_label": "m", "preset": "standard", "arm": arm, "item_id": item, "category": cat,
                "sub_label": sub, "dirty": dirty, "repeat": repeat, "gold": f"gold {item}",
                "evidence": {"planted_span_present": planted} if dirty else {}}
    rows = [row("S01", "plain", "faithful", dirty=True, planted=True),
            row("S01", "strict", "rewritten", "lead_in", dirty=True, planted=True),
            row("S02", "plain", "truncated", "prefix"), row("S02", "strict", "truncated", "prefix"),
            row("S03", "plain", "faithful_normalized", "quotes"), row("S03", "strict", "faithful")]
    s = summarise(rows)
    plain = next(r for r in s["rates"] if r["arm"] == "plain")
    assert (plain["n"], plain["faithful"], plain["faithful_incl_normalized"]) == (3, 1, 2)
    assert s["taxonomy"]["strict"]["truncated"] == 1 and s["taxonomy"]["plain"]["faithful_normalized"] == 1
    assert s["hardest_items"][0] == {"item_id": "S02", "failures": 2, "attempts": 2,
                                     "most_common": "truncated/prefix", "gold": "gold S02"}
    assert s["failed_dirty_with_planted_error_intact"] == 1
