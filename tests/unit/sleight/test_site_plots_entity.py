"""The flagged/derailed figure: zero rates are zero bars on a 0-based axis labelled with their n, and a model not
judged yet says "not judged" (an all-zero figure used to draw an empty axis from -0.04 to 0.04)."""

from __future__ import annotations

from tamperbench.sleight.site_plots import plot_entity_vs_words

KEYS = ("flagged_entity", "flagged_words", "derailed_entity", "derailed_words")


def _summary(model, value, n):
    return {"model": model, "split": {**{k: value for k in KEYS}, "counts": {k: n for k in KEYS}}}


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def test_all_zero_rates_draw_zero_bars_with_their_n_on_a_zero_based_axis():
    fig = plot_entity_vs_words([_summary("m1", 0.0, 12), _summary("m2", 0.0, 7)])
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert lo == 0 and hi >= 10
    assert [p.get_height() for p in ax.patches] == [0.0] * 8
    assert _texts(ax).count("n=12") == 4 and _texts(ax).count("n=7") == 4
    assert "not judged" not in _texts(ax)


def test_unjudged_model_says_not_judged_and_judged_rates_set_the_axis():
    fig = plot_entity_vs_words([_summary("judged", 40.0, 10), _summary("fresh", None, None)])
    ax = fig.axes[0]
    assert "not judged" in _texts(ax)
    assert _texts(ax).count("n=10") == 4
    assert ax.get_ylim()[1] >= 40.0 * 1.2 - 1e-9
