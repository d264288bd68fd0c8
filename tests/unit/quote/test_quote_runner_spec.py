"""Run specs and trial keys (no model needed): bad input is a UserError naming the option."""

import pytest

from tamperbench.errors import UserError
from tamperbench.quote.runner import QuoteRunSpec, build_trials, data_sha256
from tamperbench.quote.tables import summarise, wilson
from tamperbench.spec_base import build_spec


@pytest.mark.parametrize("kwargs, match", [
    ({"arms": ["loose"]}, "--arm"), ({"repeats": 0}, "--repeats"), ({"repeats": 2}, "--temperature"),
    ({"temperature": -1.0}, "--temperature"), ({"max_new_tokens": 0}, "--max-new-tokens"),
    ({"batch_size": 0}, "--batch-size"), ({"preset": "long"}, "--preset"), ({"item_ids": ["K01"]}, "--items"),
])
def test_bad_specs_are_user_errors(kwargs, match):
    with pytest.raises(UserError, match=match):
        build_spec(QuoteRunSpec, **kwargs)  # the flags' spec builder names the option
    with pytest.raises(UserError, match="spec.json: field '"):
        build_spec(QuoteRunSpec, "spec.json", **kwargs)  # a spec file's names the field


def test_trials_cover_items_arms_repeats_with_stable_unique_keys():
    spec = QuoteRunSpec(repeats=2, temperature=0.7, data_sha256=data_sha256())
    trials = build_trials(spec)
    assert len(trials) == 37 * 2 * 2
    assert len({t.key for t in trials}) == len(trials)
    assert [t.key for t in trials] == [t.key for t in build_trials(spec)]
    other_seed = build_trials(spec.model_copy(update={"seed": 1}))
    assert not {t.key for t in trials} & {t.key for t in other_seed}
    sub = build_trials(QuoteRunSpec(item_ids=["S01", "S17"], arms=["strict"]))
    assert [(t.item.id, t.arm) for t in sub] == [("S01", "strict"), ("S17", "strict")]
    assert "preserving any typos" in sub[0].prompt


def test_wilson_interval_is_sane_at_the_edges():
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.277540, abs=1e-6)  # z^2/(n+z^2) = 3.8416/13.8416
    lo, hi = wilson(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.722460, abs=1e-6)


# Away from 0/n and n/n, where the p(1-p)/n term is not zero. Expected values worked by hand from
# (p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n) with z = 1.96, e.g. 3/10:
# centre 0.49208/1.38416 = 0.355508, half-width 1.96 * sqrt(0.030604) / 1.38416 = 0.247719.
WILSON_BY_HAND = [(3, 10, 0.107789, 0.603227), (5, 10, 0.236590, 0.763410), (1, 4, 0.045586, 0.699364),
                  (57, 211, 0.214734, 0.333771)]


@pytest.mark.parametrize("k, n, lo, hi", WILSON_BY_HAND)
def test_wilson_interval_away_from_the_edges_by_hand(k, n, lo, hi):
    got = wilson(k, n)
    assert got == (pytest.approx(lo, abs=1e-6), pytest.approx(hi, abs=1e-6))


def test_wilson_matches_statsmodels_and_is_what_summarise_reports():
    from statsmodels.stats.proportion import proportion_confint

    for k, n in [(1, 3), (7, 9), (40, 100), (123, 500)]:
        ref = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert wilson(k, n) == (pytest.approx(ref[0], abs=2e-4), pytest.approx(ref[1], abs=2e-4))
    row = {"model_label": "m", "preset": "standard", "arm": "plain", "sub_label": None, "dirty": False,
           "repeat": 0, "gold": "g", "evidence": {}}
    rows = [{**row, "item_id": f"S{i:02d}", "category": "faithful" if i < 3 else "truncated"} for i in range(10)]
    (rate,) = summarise(rows)["rates"]
    assert (rate["n"], rate["faithful"], rate["faithful_rate"]) == (10, 3, 0.3)
    assert rate["ci95"] == [pytest.approx(0.107789, abs=1e-6), pytest.approx(0.603227, abs=1e-6)]


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
