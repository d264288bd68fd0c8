"""The progress bars' token bounds are the dry runs' numbers (issue 14 item 3: "the progress bar's
ETA uses the same model"), counted by hand from the presets; no model is loaded.

The hand counts are the ones tests/integration/test_dry_run.py checks the printed plans
against: Exact Words standard = 37 items x 2 arms x 96 tokens; OWMI quick = 300 records x 20 tokens
+ 3 units x 4 model conditions x 16 task tokens = 6,192."""

from __future__ import annotations

import io

from rich.console import Console

from tamperbench.estimate import NoStore
from tamperbench.owmi.run.plan import pending_units as owmi_pending
from tamperbench.progress import ETA_FIELDS, BarEta, countdown, progress_bar
from tamperbench.suites import get_suite


def owmi_row_tokens(spec, model: str, items: dict, have: set) -> int:
    """The bound of ``model``'s bar in the OWMI runner: the registry's row-token model over its pending units."""
    return countdown("owmi", spec, [p for _, p, _ in owmi_pending(spec, items, have, [model])]).tracker.row_tokens


def _quote_pending(**over):
    from tamperbench.quote.runner import QuoteRunSpec, data_sha256, plan

    spec = QuoteRunSpec(**over).model_copy(update={"data_sha256": data_sha256()})
    return spec, plan(spec, NoStore())


def test_quote_standard_row_tokens_by_hand():
    spec, units = _quote_pending()
    assert len(units) == 37 * 2
    assert get_suite("quote").row_tokens_for(spec, units) == 37 * 2 * 96 == 7_104
    assert countdown("quote", spec, units).tracker.row_tokens == 7_104  # the bar's bound, through the registry
    spec, units = _quote_pending(arms=["plain"], max_new_tokens=10)
    assert get_suite("quote").row_tokens_for(spec, units) == 37 * 10


def _owmi(**over):
    from tamperbench.owmi.run.spec import load_items
    from tamperbench.owmi.run.spec import quick_spec

    spec = quick_spec(**over)
    return spec, {b: load_items(b, spec.items_per_benchmark) for b in spec.benchmarks}


def test_owmi_quick_row_tokens_by_hand_fresh_and_with_one_unit_stored():
    from tamperbench.owmi.run.plan import planned_keys, unit_coords

    spec, items = _owmi()
    # the quick preset: 2 items x 2 seeds x 3 (operator, dose) = 12 units, each Track A x 5 probe
    # families x 2 scopes x (4 model conditions + 1 observer tier) = 50 records, 64 tokens a probe answer
    assert sum(len(p) for _, p, _ in owmi_pending(spec, items, set())) == 600
    assert owmi_row_tokens(spec, "embedded", items, set()) == 600 * 64 + 12 * 4 * 12 == 38_976
    # one unit's 50 records stored: 550 probe answers and 11 units' task answers are left
    it = items["builtin"][0]
    have = {k for k, _, _ in planned_keys(spec, unit_coords(spec, "embedded", "builtin", spec.objects[0],
                                                        spec.operators[0], it, 0), [])}
    assert len(have) == 50
    assert owmi_row_tokens(spec, "embedded", items, have) == 550 * 64 + 11 * 4 * 12
    assert [s for _, _, s in owmi_pending(spec, items, have)] == [50] + [0] * 11
    assert owmi_row_tokens(spec, "another-model", items, have) == 38_976  # keys name their model


def test_owmi_track_c_runs_in_its_own_frame_and_pays_its_task_answers_again():
    # tracks A and C, Track C without the system prompt (the default): two context frames per unit.
    # Per unit: A 5 probes x 2 scopes x 5 conditions x 64 tokens, C 1 family x 2 scopes x 5 x 32,
    # and the task answered under 4 model conditions in each of the 2 frames, 12 tokens each; 12 units.
    spec, items = _owmi(tracks=["A", "C"])
    per_unit = 5 * 2 * 5 * 64 + 1 * 2 * 5 * 32 + 2 * 4 * 12
    assert owmi_row_tokens(spec, "embedded", items, set()) == 12 * per_unit == 43_392
    spec, items = _owmi(tracks=["A", "C"], track_c_system="shared")  # one frame: the task once
    assert owmi_row_tokens(spec, "embedded", items, set()) == 12 * (per_unit - 4 * 12)


def test_bar_eta_fields_render_in_the_bar():
    buf = io.StringIO()
    countdown = BarEta(6_192)
    assert countdown.fields() == {"tok": "0/6,192", "eta": "eta -"}  # nothing decoded, no calibration
    with progress_bar("owmi", *ETA_FIELDS, console=Console(file=buf, width=200)) as bar:
        task = bar.add_task("m", total=3, **countdown.fields())
        countdown.attach(bar, task)
        countdown.add(1_000)
        countdown.add(548)
    assert countdown.tokens == 1_548
    assert "1,548/6,192 tok eta -" in buf.getvalue(), buf.getvalue()  # under the 10 s warm-up: no rate yet
    countdown.t0 -= 100.0  # as if 100 s had passed: 1,548 tokens at 15.48 tokens/s, 4,644 left = 300 s
    assert countdown.fields() == {"tok": "1,548/6,192", "eta": "eta <= 5 min 00 s"}
